package rpcstatus

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
// RecvMsg of a stream), answer with the status of the failure.
//
// Two servers use it: the hub (hub/grpcerr.DecodeOptions, statuses with
// ErrorInfo and BadRequest details) and the satellite's local health door
// (satellite/healthdoor, plain statuses from DecodeStatus).

// Reasons of a DecodeFailure (the hub's ErrorInfo reasons of the same name).
const (
	// ReasonMalformedMessage: the request could not be decoded at all.
	ReasonMalformedMessage = "MALFORMED_MESSAGE"
	// ReasonInvalidUTF8: a string field is not valid UTF-8 (Field names it).
	ReasonInvalidUTF8 = textcheck.ReasonInvalidUTF8
	// ReasonMessageTooLarge: the request is larger than its service allows.
	ReasonMessageTooLarge = "MESSAGE_TOO_LARGE"
)

// markerField is the unknown field that carries a decode failure: the
// largest valid field number, which no ironlink message uses.
const markerField = protowire.MaxValidNumber

// DecodeFailure is a request the codec of DecodeOptions could not decode.
type DecodeFailure struct {
	// Reason is one of ReasonMalformedMessage, ReasonInvalidUTF8,
	// ReasonMessageTooLarge.
	Reason string
	// Field is the proto path of the string field that is not valid UTF-8
	// ("reason", "events[3].nodeName"; map entries as "labels.key"); "" for
	// the other reasons.
	Field string
	// Detail is the decoder's error text, or for ReasonMessageTooLarge both
	// sizes in bytes.
	Detail string
}

// DecodeStatus is the plain status of a decode failure (no details):
// InvalidArgument naming the field ("events[0].message is not valid
// UTF-8 ..."), InvalidArgument for a message that cannot be decoded,
// ResourceExhausted for one larger than the limit.
func DecodeStatus(f DecodeFailure) error {
	switch {
	case f.Reason == ReasonMessageTooLarge:
		return Error(codes.ResourceExhausted, f.Detail)
	case f.Reason == ReasonInvalidUTF8 && f.Field != "":
		return Error(codes.InvalidArgument, InvalidUTF8Message(f.Field))
	}
	return Error(codes.InvalidArgument, MalformedMessage(f.Detail))
}

// InvalidUTF8Message is the message of a status for string field field
// that is not valid UTF-8.
func InvalidUTF8Message(field string) string {
	return textcheck.Prefix(field, 256) + " is not valid UTF-8 (proto3 strings must be UTF-8)"
}

// MalformedMessage is the message of a status for a request that could
// not be decoded, with the decoder's error detail (cut to 256 bytes).
func MalformedMessage(detail string) string {
	return "the request could not be decoded: " + textcheck.Prefix(detail, 256)
}

// DecodeOptions returns the server options that turn request decode
// failures into the status toStatus makes of them (nil: DecodeStatus)
// instead of grpc-go's Internal: a codec for this server only
// (grpc.ForceServerCodecV2; clients and other servers keep the registered
// proto codec) and the unary and stream interceptors that read its marker.
// Install all of them, after the logging interceptor (so the log shows the
// code) and before any that reads the request. Without the interceptors a
// bad request would reach the handler empty: never install the codec
// alone.
//
// limit, when not nil, returns the largest encoded message (bytes)
// accepted as the message it is called with (0: no limit beyond the
// server's grpc.MaxRecvMsgSize): a larger one is not decoded, and the
// interceptors answer ReasonMessageTooLarge naming both sizes.
func DecodeOptions(toStatus func(DecodeFailure) error, limit func(proto.Message) int) []grpc.ServerOption {
	if toStatus == nil {
		toStatus = DecodeStatus
	}
	c := codec{inner: encoding.GetCodecV2(grpcproto.Name), limit: limit}
	d := decoder{toStatus: toStatus}
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(c),
		grpc.ChainUnaryInterceptor(d.unary),
		grpc.ChainStreamInterceptor(d.stream),
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

// decoder holds the interceptors of DecodeOptions.
type decoder struct{ toStatus func(DecodeFailure) error }

// unary answers the status of a request the codec could not decode;
// other requests go to the handler.
func (d decoder) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if f, ok := failure(req); ok {
		return nil, d.toStatus(f)
	}
	return handler(ctx, req)
}

// stream makes RecvMsg return the status of a message the codec could not
// decode.
func (d decoder) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, checkedStream{ss, d.toStatus})
}

type checkedStream struct {
	grpc.ServerStream
	toStatus func(DecodeFailure) error
}

func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if f, ok := failure(m); ok {
		return s.toStatus(f)
	}
	return nil
}

// failure returns the decode failure a message carries in the codec's
// marker; ok is false when it carries none.
func failure(v any) (f DecodeFailure, ok bool) {
	m, isMsg := v.(proto.Message)
	if !isMsg {
		return DecodeFailure{}, false
	}
	unknown := m.ProtoReflect().GetUnknown()
	if len(unknown) == 0 {
		return DecodeFailure{}, false
	}
	payload, found := marker(unknown)
	if !found {
		return DecodeFailure{}, false
	}
	parts := strings.SplitN(payload, "\n", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	f = DecodeFailure{Reason: parts[0], Field: parts[1], Detail: parts[2]}
	if f.Reason != ReasonMessageTooLarge && f.Reason != ReasonInvalidUTF8 {
		f.Reason = ReasonMalformedMessage
	}
	return f, true
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
