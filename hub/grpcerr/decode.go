package grpcerr

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ironlink/ironlink/internal/textcheck"
)

// Why a codec: in grpc-go v1.85 a request is decoded in
// serverStream.RecvMsg (stream.go), which calls recv (rpc_util.go); a codec
// error there becomes status.Errorf(codes.Internal, "grpc: failed to
// unmarshal the received message: %v", err) — a status the codec returns is
// flattened into that message — and RecvMsg's deferred WriteStatus sends it
// to the client at once, before the handler or any interceptor sees the
// error. Unary calls take the same path (Server.wrapUnaryHandler's decode
// function is stream.RecvMsg, called by the generated handler before the
// unary interceptors run). So the codec must not fail: on an unmarshal error
// it resets the message and leaves a marker in its unknown fields, and the
// interceptors, which see every decoded message (the unary request; every
// RecvMsg of a stream), answer InvalidArgument.

// markerField is the unknown field that carries a decode failure: the
// largest valid field number, which no ironlink message uses.
const markerField = protowire.MaxValidNumber

// DecodeOptions returns the server options that turn request decode failures
// into InvalidArgument naming the field (BadRequest, ErrorInfo
// INVALID_UTF8 or MALFORMED_MESSAGE) instead of grpc-go's Internal: a codec
// for this server only (grpc.ForceServerCodecV2; clients and other servers
// keep the registered proto codec) and the unary and stream interceptors
// that read its marker. Install all of them, after the logging interceptor
// (so the log shows the code) and before any that reads the request:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(logging...), grpc.ChainStreamInterceptor(logging...),
//		grpcerr.DecodeOptions()...)
//
// Without the interceptors a bad request would reach the handler empty:
// never install the codec alone.
//
// limit, when given, returns the largest encoded message (bytes) accepted
// as the message it is called with (0: no limit beyond the server's
// grpc.MaxRecvMsgSize): a larger one is not decoded, and the interceptors
// answer ResourceExhausted (ErrorInfo MESSAGE_TOO_LARGE) naming both sizes.
func DecodeOptions(limit ...func(proto.Message) int) []grpc.ServerOption {
	c := codec{inner: encoding.GetCodecV2(grpcproto.Name)}
	if len(limit) > 0 {
		c.limit = limit[0]
	}
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(c),
		grpc.ChainUnaryInterceptor(UnaryDecodeInterceptor),
		grpc.ChainStreamInterceptor(StreamDecodeInterceptor),
	}
}

// codec is the proto codec, except that Unmarshal never fails on a
// proto.Message: see the comment above markerField.
type codec struct {
	inner encoding.CodecV2
	limit func(proto.Message) int // nil: none
}

func (c codec) Name() string { return c.inner.Name() }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(proto.Message); ok && c.limit != nil {
		if max := c.limit(m); max > 0 && data.Len() > max {
			mark(m, ReasonMessageTooLarge, "", fmt.Sprintf("the request is %d bytes, this service accepts at most %d", data.Len(), max))
			return nil
		}
	}
	err := c.inner.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	switch {
	case !ok:
		return err
	case err == nil && len(m.ProtoReflect().GetUnknown()) == 0:
		return nil
	case err == nil:
		if _, spoofed := marker(m.ProtoReflect().GetUnknown()); spoofed {
			mark(m, ReasonMalformedMessage, "", "field number "+strconv.Itoa(int(markerField))+" is reserved")
		}
		return nil
	}
	reason, field := ReasonMalformedMessage, ""
	if path, found := badUTF8Field(m.ProtoReflect().Descriptor(), data.Materialize(), ""); found {
		reason, field = ReasonInvalidUTF8, path
	}
	mark(m, reason, field, err.Error())
	return nil
}

// mark resets m and leaves the decode failure in its unknown fields.
func mark(m proto.Message, reason, field, detail string) {
	proto.Reset(m)
	b := protowire.AppendTag(nil, markerField, protowire.BytesType)
	b = protowire.AppendString(b, reason+"\n"+field+"\n"+detail)
	m.ProtoReflect().SetUnknown(b)
}

// marker returns the payload of the marker field in unknown fields b.
func marker(b []byte) (payload string, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if num == markerField && typ == protowire.BytesType {
			payload, n := protowire.ConsumeString(b)
			return payload, n >= 0
		}
		if num == markerField {
			return "", true
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return "", false
		}
		b = b[n:]
	}
	return "", false
}

// UnaryDecodeInterceptor answers InvalidArgument for a request the codec of
// DecodeOptions could not decode; other requests go to the handler.
func UnaryDecodeInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := decodeFailure(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamDecodeInterceptor makes RecvMsg return InvalidArgument for a message
// the codec of DecodeOptions could not decode.
func StreamDecodeInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, checkedStream{ss})
}

type checkedStream struct{ grpc.ServerStream }

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return decodeFailure(m)
}

// decodeFailure returns the InvalidArgument status for a message carrying
// the codec's marker, else nil.
func decodeFailure(v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return nil
	}
	unknown := m.ProtoReflect().GetUnknown()
	if len(unknown) == 0 {
		return nil
	}
	payload, ok := marker(unknown)
	if !ok {
		return nil
	}
	parts := strings.SplitN(payload, "\n", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	reason, field, detail := parts[0], parts[1], parts[2]
	if reason == ReasonMessageTooLarge {
		return ResourceExhausted(reason, detail)
	}
	if reason == ReasonInvalidUTF8 && field != "" {
		return InvalidArgument(field, reason, field+" is not valid UTF-8 (proto3 strings must be UTF-8)")
	}
	return InvalidArgument("", ReasonMalformedMessage, "the request could not be decoded: "+textcheck.Prefix(detail, 256))
}

// badUTF8Field walks the wire bytes b of a message of type md and returns
// the proto path of the first string field whose value is not valid UTF-8
// ("reason", "batch.devices[3].device_id"; map entries as "labels.key").
// found is false when there is none or b is not well-formed.
func badUTF8Field(md protoreflect.MessageDescriptor, b []byte, prefix string) (path string, found bool) {
	seen := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return "", false
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		name := prefix + string(fd.Name())
		if fd.IsList() {
			name += "[" + strconv.Itoa(seen[num]) + "]"
			seen[num]++
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return name, true
			}
		case protoreflect.MessageKind:
			if p, ok := badUTF8Field(fd.Message(), v, name+"."); ok {
				return p, true
			}
		}
	}
	return "", false
}
