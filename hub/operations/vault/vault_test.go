package vault

import (
	"testing"
	"time"
)

func TestVaultKeepsCopiesUntilTTLOrDrop(t *testing.T) {
	v := New("r1", time.Minute)
	now := time.Now()
	v.now = func() time.Time { return now }
	info := map[string]string{"ipmi_password": "p"}
	if !v.Put("op1", info) {
		t.Fatal("put refused")
	}
	info["ipmi_password"] = "changed"
	if got, ok := v.Get("op1"); !ok || got["ipmi_password"] != "p" {
		t.Fatalf("get %v %v: want the copy taken at Put", got, ok)
	}
	now = now.Add(2 * time.Minute)
	if _, ok := v.Get("op1"); ok {
		t.Fatal("an entry past its TTL is still returned")
	}
	v.Put("op2", info)
	v.Drop("op2")
	if _, ok := v.Get("op2"); ok || v.Len() != 0 {
		t.Fatalf("after Drop: ok=%v len=%d", ok, v.Len())
	}
	if !v.SameReplica("r1/other-process") || v.SameReplica("r2/"+v.Holder()[3:]) || v.SameReplica("r10/x") {
		t.Fatalf("SameReplica wrong for holder %s", v.Holder())
	}
}
