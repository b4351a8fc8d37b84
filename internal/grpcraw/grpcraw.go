// Package grpcraw is a gRPC codec for tests that send a request body as raw
// bytes — bytes the proto codec would refuse to marshal (invalid UTF-8 in a
// string, a truncated message, fuzzer output) — and decode replies as
// protobuf. Use it with grpc.ForceCodecV2(grpcraw.Codec{}) and pass a
// *[]byte as the request to ClientConn.Invoke.
package grpcraw

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Codec marshals a *[]byte unchanged and everything else, and every reply,
// with gRPC's proto codec. Its Name is "proto", so the server sees an
// ordinary application/grpc+proto request.
type Codec struct{}

// Name is the proto codec's name.
func (Codec) Name() string { return grpcproto.Name }

// Marshal returns *v for a *[]byte, else the proto encoding of v.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(*[]byte); ok {
		return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
	}
	return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
}

// Unmarshal decodes data into v with the proto codec.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2(grpcproto.Name).Unmarshal(data, v)
}
