package ironic

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// maxScalars bounds the keys kept of one extra or properties object: the
// label mapping needs a few, and a node's extra is free-form.
const maxScalars = 256

// optScalars is a JSON object field (the node's extra) kept as its scalar
// values by key; Set records that the key was in the answer. A value that
// is not an object (null included) is Set with nothing known.
type optScalars struct {
	V   map[string]string
	Set bool
}

func (o *optScalars) UnmarshalJSON(b []byte) error {
	*o = optScalars{Set: true, V: scalars(b)}
	return nil
}

// scalars returns the scalar values of the JSON object b by key: strings
// as they are, numbers as written, booleans as "true"/"false"; objects,
// arrays and nulls are left out, and so is everything when b is not an
// object. At most maxScalars keys (the first in key order are not
// guaranteed: a node with more is not one a mapping reads reliably).
func scalars(b []byte) map[string]string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil
	}
	var out map[string]string
	for k, v := range raw {
		if len(out) >= maxScalars {
			break
		}
		v = bytes.TrimSpace(v)
		if len(v) == 0 {
			continue
		}
		var s string
		switch v[0] {
		case '"':
			if json.Unmarshal(v, &s) != nil {
				continue
			}
		case 't', 'f':
			bv, err := strconv.ParseBool(string(v))
			if err != nil {
				continue
			}
			s = strconv.FormatBool(bv)
		case '{', '[', 'n':
			continue
		default:
			s = string(v) // a number, as written
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = s
	}
	return out
}

// optProperties is the node's properties object, decoded for the keys of
// Properties only (the decoder skips the others). Set records that the key
// was in the answer; a value that is not an object (null included) is
// Set with nothing known.
type optProperties struct {
	CPUs     propUint   `json:"cpus"`
	MemoryMB propUint   `json:"memory_mb"`
	LocalGB  propUint   `json:"local_gb"`
	CPUArch  propString `json:"cpu_arch"`
	Set      bool       `json:"-"`
	// Scalars are every scalar value by key (Node.PropertyValues).
	Scalars map[string]string `json:"-"`
}

func (o *optProperties) UnmarshalJSON(b []byte) error {
	*o = optProperties{Set: true}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	type plain optProperties // without this method
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return nil // a value that does not fit: nothing known
	}
	*o = optProperties(p)
	o.Set = true
	o.Scalars = scalars(b)
	return nil
}

// properties converts the decoded keys; cpus above 2^32-1 is not known.
func (o *optProperties) properties() Properties {
	p := Properties{
		MemoryMB: o.MemoryMB.V, HasMemoryMB: o.MemoryMB.Set,
		LocalGB: o.LocalGB.V, HasLocalGB: o.LocalGB.Set,
		CPUArch: o.CPUArch.V, HasCPUArch: o.CPUArch.Set,
	}
	if o.CPUs.Set && o.CPUs.V <= math.MaxUint32 {
		p.CPUs, p.HasCPUs = uint32(o.CPUs.V), true
	}
	return p
}
