// What the grpc-go peers share (built into each: `go build X.go wire.go`):
// a codec that hands handlers the message bytes, and protobuf fields written
// and read with protowire by number.
package main

import (
	"github.com/golang/protobuf/proto"
	"google.golang.org/protobuf/encoding/protowire"
)

// codec: *[]byte passes as is (the handlers' messages); anything else is a
// generated message (go-plugin's own services). Registered as "proto", so
// the content-type on the wire is application/grpc.
type codec struct{}

func (codec) Marshal(v interface{}) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return proto.Marshal(v.(proto.Message))
}
func (codec) Unmarshal(d []byte, v interface{}) error {
	if b, ok := v.(*[]byte); ok {
		*b = append([]byte(nil), d...)
		return nil
	}
	return proto.Unmarshal(d, v.(proto.Message))
}
func (codec) Name() string   { return "proto" }
func (codec) String() string { return "proto" }

func putString(b []byte, n protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}
func putMessage(b []byte, n protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// putVarint leaves a zero out, as proto3 does.
func putVarint(b []byte, n protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}
func putBool(b []byte, n protowire.Number, v bool) []byte {
	if v {
		return putVarint(b, n, 1)
	}
	return b
}
func putMapEntry(b []byte, n protowire.Number, k, v string) []byte {
	return putMessage(b, n, putString(putString(nil, 1, k), 2, v))
}

// fields: a message's length-delimited values by field number, in order.
func fields(m []byte) map[protowire.Number][][]byte {
	out := map[protowire.Number][][]byte{}
	for len(m) > 0 {
		n, t, l := protowire.ConsumeTag(m)
		if l < 0 {
			return out
		}
		m = m[l:]
		l = protowire.ConsumeFieldValue(n, t, m)
		if l < 0 {
			return out
		}
		if t == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(m)
			out[n] = append(out[n], v)
		}
		m = m[l:]
	}
	return out
}
func first(f map[protowire.Number][][]byte, n protowire.Number) []byte {
	if len(f[n]) == 0 {
		return nil
	}
	return f[n][0]
}
func stringsOf(m []byte, n protowire.Number) []string {
	var out []string
	for _, v := range fields(m)[n] {
		out = append(out, string(v))
	}
	return out
}
