// Package linktest is test-only support for the link protocol
// (ironlink.v1.LinkService/Connect) from the hub's side, in
// go-control-plane's habit of checking the protocol inside the mock
// stream's Send:
//
//   - Checker wraps any LinkService_ConnectServer (a real gRPC stream or a
//     Stream) and records a violation whenever the hub sends something the
//     protocol forbids (see Checker), so every test that goes through it
//     checks the protocol for free;
//   - Stream is an in-memory LinkService_ConnectServer for calling
//     link.Server.Connect directly, without gRPC.
//
// Production code must not import it.
package linktest
