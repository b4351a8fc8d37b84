package grpcerr

import (
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/ironlink/ironlink/internal/rpcstatus"
)

// DecodeOptions returns the server options that turn request decode failures
// into InvalidArgument naming the field (BadRequest, ErrorInfo
// INVALID_UTF8 or MALFORMED_MESSAGE) instead of grpc-go's Internal: the
// codec and interceptors of internal/rpcstatus.DecodeOptions (which explains
// why a codec), answering with this package's statuses (decodeStatus).
// Install all of them, after the logging interceptor (so the log shows the
// code) and before any that reads the request:
//
//	grpc.NewServer(grpc.ChainUnaryInterceptor(logging...), grpc.ChainStreamInterceptor(logging...),
//		grpcerr.DecodeOptions()...)
//
// limit, when given, returns the largest encoded message (bytes) accepted
// as the message it is called with (0: no limit beyond the server's
// grpc.MaxRecvMsgSize): a larger one is not decoded, and the interceptors
// answer ResourceExhausted (ErrorInfo MESSAGE_TOO_LARGE) naming both sizes.
func DecodeOptions(limit ...func(proto.Message) int) []grpc.ServerOption {
	var l func(proto.Message) int
	if len(limit) > 0 {
		l = limit[0]
	}
	return rpcstatus.DecodeOptions(decodeStatus, l)
}

// decodeStatus is the hub's status of a request that could not be decoded.
func decodeStatus(f rpcstatus.DecodeFailure) error {
	switch {
	case f.Reason == ReasonMessageTooLarge:
		return ResourceExhausted(f.Reason, f.Detail)
	case f.Reason == ReasonInvalidUTF8 && f.Field != "":
		return InvalidArgument(f.Field, f.Reason, rpcstatus.InvalidUTF8Message(f.Field))
	}
	return InvalidArgument("", ReasonMalformedMessage, rpcstatus.MalformedMessage(f.Detail))
}
