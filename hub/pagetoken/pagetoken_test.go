package pagetoken_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/pagetoken"
)

func TestTokens(t *testing.T) {
	req := &ironlinkv1.ListDevicesRequest{Site: "alpha", PageSize: 50, NamePrefix: "rack-1"}
	tok := pagetoken.Encode(req, "cursor|42")

	// The same filters with another page size (and the token itself set)
	// continue.
	next := &ironlinkv1.ListDevicesRequest{Site: "alpha", PageSize: 7, NamePrefix: "rack-1", PageToken: tok}
	if cur, err := pagetoken.Decode(next, tok); err != nil || cur != "cursor|42" {
		t.Fatalf("Decode = %q, %v; want the cursor", cur, err)
	}
	if cur, err := pagetoken.Cursor(next, ""); err != nil || cur != "" {
		t.Fatalf("Cursor of the first page = %q, %v", cur, err)
	}

	for _, tc := range []struct {
		name string
		req  *ironlinkv1.ListDevicesRequest
		tok  string
		want error
	}{
		{"other site", &ironlinkv1.ListDevicesRequest{Site: "beta", NamePrefix: "rack-1"}, tok, pagetoken.ErrOtherRequest},
		{"filter dropped", &ironlinkv1.ListDevicesRequest{Site: "alpha"}, tok, pagetoken.ErrOtherRequest},
		{"filter added", &ironlinkv1.ListDevicesRequest{Site: "alpha", NamePrefix: "rack-1", IncludeRemoved: true}, tok, pagetoken.ErrOtherRequest},
		{"not base64", req, "!!", pagetoken.ErrMalformed},
		{"too short", req, "AQ", pagetoken.ErrMalformed},
		{"unknown version", req, "AgAAAAAAAAAAeA", pagetoken.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pagetoken.Decode(tc.req, tc.tok); !errors.Is(err, tc.want) {
				t.Fatalf("Decode: %v, want %v", err, tc.want)
			}
			_, err := pagetoken.Cursor(tc.req, tc.tok)
			if status.Code(err) != codes.InvalidArgument || len(grpcerr.Fields(err)) != 1 || grpcerr.Fields(err)[0] != "page_token" {
				t.Fatalf("Cursor: %v, want InvalidArgument naming page_token", err)
			}
		})
	}

	// A token of one RPC's listing is not one of another with the same bytes.
	cmds := &ironlinkv1.ListCommandsRequest{Site: "alpha"}
	devs := &ironlinkv1.ListDevicesRequest{Site: "alpha"}
	if _, err := pagetoken.Decode(devs, pagetoken.Encode(cmds, "1")); !errors.Is(err, pagetoken.ErrOtherRequest) {
		t.Fatalf("ListCommands token on ListDevices: %v", err)
	}
}
