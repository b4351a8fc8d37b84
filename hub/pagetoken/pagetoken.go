// Package pagetoken encodes the opaque page tokens of the hub's List RPCs
// (Google AIP-158 "Pagination"): a cursor (the position after the last item
// of a page) bound to the request that produced it, so that a token passed
// with other filters is refused instead of silently continuing a different
// listing.
//
// A token is base64url (RFC 4648 §5, no padding) of
//
//	version (1 byte, 1) | fingerprint (8 bytes) | cursor (the rest)
//
// where the fingerprint is the first 8 bytes of the SHA-256 of the request
// message's full name, a NUL byte and its deterministic protobuf encoding with
// its page_token and page_size fields cleared: a client may change the page size between pages (AIP-158), not the
// filters. Tokens are not secret and not signed: the cursor is checked by the
// caller like any other input, and a forged token only pages through what the
// caller may list anyway.
package pagetoken

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ironlink/ironlink/hub/grpcerr"
)

const version = 1

// ErrMalformed is returned by Decode for a token this package did not
// produce (bad base64, unknown version, too short).
var ErrMalformed = errors.New("page_token is malformed: pass next_page_token of the previous page unchanged")

// ErrOtherRequest is returned by Decode for a token issued for a request with
// other filters than the one it came with.
var ErrOtherRequest = errors.New("page_token was issued for a listing with other filters: " +
	"send the same filters as the call that returned it, or start again without page_token")

// Encode returns the token for the page after cursor in the listing req
// asks for. cursor is opaque to this package (an id, an offset, a
// time|id pair); it may be empty.
func Encode(req proto.Message, cursor string) string {
	b := make([]byte, 0, 9+len(cursor))
	b = append(b, version)
	b = append(b, fingerprint(req)...)
	b = append(b, cursor...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the cursor of tok, a token Encode returned for a request
// with the same filters as req. It returns ErrMalformed or ErrOtherRequest;
// tok must not be empty (an empty page_token means the first page and has
// no cursor).
func Decode(req proto.Message, tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) < 9 || b[0] != version {
		return "", ErrMalformed
	}
	if !bytes.Equal(b[1:9], fingerprint(req)) {
		return "", ErrOtherRequest
	}
	return string(b[9:]), nil
}

// Cursor is Decode for an RPC handler: the cursor of req's page_token tok,
// "" for the first page (tok empty), or an InvalidArgument status naming the
// field page_token (reason INVALID_VALUE) with Decode's message.
func Cursor(req proto.Message, tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	cur, err := Decode(req, tok)
	if err != nil {
		return "", invalid(err)
	}
	return cur, nil
}

// Malformed is the InvalidArgument status (field page_token) for a token
// whose cursor the RPC cannot use: Cursor decoded it, but it is not a
// position of that listing.
func Malformed() error { return invalid(ErrMalformed) }

func invalid(err error) error {
	return grpcerr.InvalidArgument("page_token", grpcerr.ReasonInvalidValue, err.Error())
}

// fingerprint is the first 8 bytes of the SHA-256 of req's full name, NUL,
// and req's deterministic encoding without its page_token and page_size
// fields.
func fingerprint(req proto.Message) []byte {
	m := proto.Clone(req)
	fields := m.ProtoReflect().Descriptor().Fields()
	for _, name := range []protoreflect.Name{"page_token", "page_size"} {
		if fd := fields.ByName(name); fd != nil {
			m.ProtoReflect().Clear(fd)
		}
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		// A request that arrived over gRPC was decoded from these bytes and
		// re-encodes; a message that cannot is bound to nothing usable.
		raw = nil
	}
	h := sha256.New()
	h.Write([]byte(m.ProtoReflect().Descriptor().FullName()))
	h.Write([]byte{0})
	h.Write(raw)
	return h.Sum(nil)[:8]
}
