package openstack

import (
	"reflect"
	"testing"
)

func TestCallsParsesAccessRuleRequests(t *testing.T) {
	got := Calls("baremetal", `
		GET /v1/nodes

		DELETE /v1/nodes/*/traits/*
	`)
	want := []APICall{
		{Service: "baremetal", Method: "GET", Path: "/v1/nodes"},
		{Service: "baremetal", Method: "DELETE", Path: "/v1/nodes/*/traits/*"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Calls = %+v, want %+v", got, want)
	}
}

func TestCallsRefusesAMalformedRequest(t *testing.T) {
	for _, bad := range []string{"GET", "get /v1/nodes", "GET v1/nodes", "GET /v1/nodes extra", "GET /v1/nodes\n/v1/ports"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Calls(%q) did not panic", bad)
				}
			}()
			Calls("baremetal", bad)
		}()
	}
}
