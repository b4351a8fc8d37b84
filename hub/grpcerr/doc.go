// Package grpcerr is the hub's one map from errors to gRPC statuses, used by
// the link (hub/link) and the operator API (hub/fleet) alike. Errors a client
// can act on carry google.rpc error details (google.golang.org/genproto/
// googleapis/rpc/errdetails), which grpcurl prints:
//
//   - every status made here has an ErrorInfo with a stable Reason (the
//     Reason* constants and textcheck's, UPPER_SNAKE, never renamed) in
//     Domain "ironlink.v1";
//   - InvalidArgument adds a BadRequest whose field violation names the
//     field by its proto path ("reason", "batch.devices[3].device_id");
//   - NotFound adds a ResourceInfo; an Unavailable database adds a
//     RetryInfo.
//
// Messages are capped at MaxMessageBytes and made valid UTF-8; callers
// still name user input with textcheck.Quote so a 1 MB id is never echoed.
//
// Usage in a handler:
//
//	if err := textcheck.Text("reason", req.GetReason(), MaxReasonBytes); err != nil {
//		return nil, grpcerr.FromCheck(err) // InvalidArgument, field "reason"
//	}
//	if _, err := uuid.Parse(id); err != nil {
//		return nil, grpcerr.InvalidArgument("device_id", grpcerr.ReasonNotUUID,
//			"device_id "+textcheck.Quote(id)+" is not a UUID")
//	}
//	d, err := st.GetDevice(ctx, id)
//	if err != nil {
//		return nil, grpcerr.FromStore(err) // NotFound, PermissionDenied, Aborted, Unavailable, ...
//	}
//
// This package and internal/rpcstatus (the detail-less statuses of code
// outside hub/, which may not import this one) are the only ones that
// build statuses (status.New, Error,
// WithDetails, errdetails values); TestOnlyGrpcerrBuildsStatuses walks the
// product code under hub/, satellite/ and internal/ and fails, naming
// file:line, at any other place that does. Its files:
//
//   - errmap.go: the map from domain errors to statuses. FromStore is the
//     only place where store errors (hub/store's ErrNotFound, ErrWrongSite,
//     ErrFenced, ErrOperationActive, ErrNotPending, ..., PostgreSQL errors)
//     and context errors become codes; see its table. FromStoreNamed adds a
//     ResourceInfo to a NotFound, FromBulk maps a bulk call's refusals.
//   - grpcerr.go: the reasons, and the constructors whose code is their
//     name (InvalidArgument, NotFound, PermissionDenied,
//     FailedPrecondition, ResourceExhausted) for what a handler refuses
//     itself.
//   - statuses.go: named answers (ReplicaDraining, HelloTimeout,
//     RateLimited, AmbiguousDeviceName, ...), each one status shape.
//   - decode.go: request decode failures (below).
//
// A new refusal is added here, as a case of FromStore for a new store error
// or as a constructor, and called from the handler; no other package picks
// a code. Two answers carry no details, as they always did: Unauthenticated
// (a refused token or certificate) and Internal.
//
// A handler logs a database failure itself (FromStore does not log):
// status.Code(grpcerr.FromStore(err)) == codes.Unavailable says when.
//
// Decode failures: grpc-go (v1.85, rpc_util.go recv) turns a request that
// the proto codec cannot unmarshal — for example a proto3 string that is not
// valid UTF-8 — into codes.Internal, and writes that status before any
// interceptor can change it (serverStream.RecvMsg in stream.go). DecodeOptions installs
// a server codec that instead leaves a marker in the message and an
// interceptor pair that answers InvalidArgument naming the offending field
// (internal/rpcstatus/decode.go, shared with the satellite's health door);
// hub/app installs them on the hub's server.
//
// This package imports hub/store (for its sentinel errors),
// internal/textcheck and internal/rpcstatus, nothing else of the hub, and never the satellite. The
// CLI (hub/ctl) does not import it (it would link the store): it reads
// statuses only, and words a stream the hub closed without a status itself.
package grpcerr
