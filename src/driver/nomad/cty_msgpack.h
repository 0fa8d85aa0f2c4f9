// MessagePack as go-cty's cty/msgpack writes and reads it with the settings
// Nomad's client uses (vmihailenco/msgpack v5, UseCompactInts, no compact
// floats): the bytes a plugin's config and a task's config reach a Nomad
// plugin as (SetConfigRequest.msgpack_config,
// TaskConfig.msgpack_driver_config). Owns: encoding a cty Value (Marshal),
// and decoding bytes into a Value of a given type (Unmarshal) or of the
// type they imply; decoding is for untrusted bytes (depth, lengths and
// counts checked against what is there). Does not own: the value model
// (driver/nomad/cty), configs (driver/nomad/hclspec).
//
// Encoding: null c0; bools c2/c3; strings str8/16/32 (fixstr under 32
// bytes); numbers as the smallest int form when an int64 holds them
// exactly, else a float64 (cb) when one does, else a string of their
// decimal digits ("0.1", "18446744073709551617"), infinities as float64;
// lists, sets and tuples as arrays (a set in cty's order); maps and objects
// as maps with their keys sorted; unknown values d4 00 00. Where the type
// given is `any` and the value's is not, the value is wrapped as
// [bin(type JSON), value] (cty's dynamic form; Nomad never sends it).
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "driver/nomad/cty.h"

namespace outpost::driver::nomad {

constexpr int kMaxMsgpackDepth = 64;

// msgpack.Marshal(v, v.Type()), what Nomad sends.
std::string MsgpackEncode(const Value& v);
// msgpack.Marshal(v, ty); v conforms to ty.
std::string MsgpackEncodeAs(const Value& v, const Type& ty);

// msgpack.Unmarshal(bytes, ty): integers, floats and decimal strings for a
// number, str or bin for a string, any extension for an unknown value. Where
// ty is `any` the value has the type the bytes imply (below), not cty's
// dynamic form, which nothing outpost reads carries. The whole input must
// be one value.
Result<Value> MsgpackDecode(std::string_view bytes, const Type& ty);
// The value with the type the bytes imply (msgpack.ImpliedType, then
// Unmarshal): arrays are tuples, maps (string keys) objects, every number
// a number, str and bin strings, nil a null of type any, extensions
// unknown values of type any.
Result<Value> MsgpackDecodeImplied(std::string_view bytes);

// cty's JSON form of a type ("string", ["list","number"],
// ["object",{"a":"bool"}], ...), the first element of the dynamic form.
std::string TypeJson(const Type& ty);

}  // namespace outpost::driver::nomad
