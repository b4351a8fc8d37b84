package auth

import (
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Every method of every ironlink.v1 service — from the registered file
// descriptors and from the generated grpc.ServiceDescs — has an entry in
// MethodScopes, and every entry names a real method.
func TestMethodScopesCoverEveryMethod(t *testing.T) {
	_ = ironlinkv1.File_ironlink_v1_link_proto // make sure the generated files are registered
	_ = ironlinkv1.File_ironlink_v1_fleet_proto
	_ = ironlinkv1.File_ironlink_v1_conditions_proto

	methods := map[string]bool{}
	files := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("ironlink.v1", func(fd protoreflect.FileDescriptor) bool {
		files++
		for i := 0; i < fd.Services().Len(); i++ {
			svc := fd.Services().Get(i)
			for j := 0; j < svc.Methods().Len(); j++ {
				methods["/"+string(svc.FullName())+"/"+string(svc.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	if files < 3 {
		t.Fatalf("found %d ironlink.v1 files in the registry", files)
	}
	for _, sd := range []grpc.ServiceDesc{ironlinkv1.LinkService_ServiceDesc, ironlinkv1.FleetService_ServiceDesc, ironlinkv1.BulkService_ServiceDesc} {
		for _, m := range sd.Methods {
			methods["/"+sd.ServiceName+"/"+m.MethodName] = true
		}
		for _, s := range sd.Streams {
			methods["/"+sd.ServiceName+"/"+s.StreamName] = true
		}
	}
	if len(methods) < 8 {
		t.Fatalf("only %d methods found: %v", len(methods), methods)
	}
	for m := range methods {
		scope, ok := RequiredScope(m)
		if !ok {
			t.Errorf("method %s has no entry in MethodScopes: say which scope it needs", m)
			continue
		}
		if !ValidScope(scope) {
			t.Errorf("method %s needs unknown scope %q", m, scope)
		}
		if IsPublicMethod(m) {
			t.Errorf("method %s is both scoped and public", m)
		}
	}
	for m := range MethodScopes {
		if !methods[m] {
			t.Errorf("MethodScopes entry %s names no method of ironlink.v1", m)
		}
	}
}

func TestMethodScopesExpected(t *testing.T) {
	want := map[string]string{
		"/ironlink.v1.LinkService/Connect":           ScopeDeviceConditionCreate,
		"/ironlink.v1.FleetService/ListDevices":      ScopeOperationsRead,
		"/ironlink.v1.FleetService/GetDevice":        ScopeOperationsRead,
		"/ironlink.v1.FleetService/GetCommand":       ScopeOperationsRead,
		"/ironlink.v1.FleetService/ListCommands":     ScopeOperationsRead,
		"/ironlink.v1.FleetService/ListSites":        ScopeOperationsRead,
		"/ironlink.v1.FleetService/QuarantineDevice": ScopeOperationsWrite,
		"/ironlink.v1.FleetService/ReleaseDevice":    ScopeOperationsWrite,
		"/ironlink.v1.FleetService/OfferDevice":      ScopeOperationsWrite,

		"/ironlink.v1.OperationService/GetOperation":    ScopeOperationsRead,
		"/ironlink.v1.OperationService/ListOperations":  ScopeOperationsRead,
		"/ironlink.v1.OperationService/WatchOperation":  ScopeOperationsRead,
		"/ironlink.v1.OperationService/StartOperation":  ScopeOperationsWrite,
		"/ironlink.v1.OperationService/CancelOperation": ScopeOperationsWrite,
	}
	for m, s := range want {
		if MethodScopes[m] != s {
			t.Errorf("%s needs %q, want %q", m, MethodScopes[m], s)
		}
	}
}

func TestPublicMethods(t *testing.T) {
	for _, m := range []string{
		"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
	} {
		if !IsPublicMethod(m) {
			t.Errorf("%s should be public", m)
		}
	}
	for _, m := range []string{"/ironlink.v1.FleetService/ListSites", "grpc.health.v1.Health", "/grpc.health.v1.HealthX/Check", ""} {
		if IsPublicMethod(m) {
			t.Errorf("%s should not be public", m)
		}
	}
	if slices.ContainsFunc(AllScopes, func(s string) bool { return !ValidScope(s) }) {
		t.Fatal("AllScopes and ValidScope disagree")
	}
}
