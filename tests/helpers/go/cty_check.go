// The Go Nomad driver's -check mode: a task config schema with every kind of
// hclspec node, and at StartTask the msgpack config the host sent compared
// byte for byte with what Nomad's client makes of the same JSON through the
// upstream libraries (Debian's hcl/v2, go-cty and hashicorp/go-msgpack):
// hcl's JSON parser and hcldec.Decode with the task's environment as
// variables, then go-cty's msgpack.Marshal(value, value.Type()), as Nomad's
// hclutils.ParseHclInterface and TaskConfig.EncodeDriverConfig do. The
// schema is built twice from one tree: as the hclspec proto the host reads,
// and as the hcldec spec Nomad's hclspecutils.Convert would make of it. The
// bytes are then decoded as a driver's DecodeDriverConfig decodes them
// (go-msgpack, Nomad's MsgpackHandle) into a struct with codec tags.
//
// The JSON comes in the task's env as GO_CHECK_JSON (the test writes it
// there and as the task's config), with a name for the case in
// GO_CHECK_NAME. Recorded in the calls file:
//
//	ConfigCheck <name> match
//	ConfigCheck <name> mismatch got=<hex> want=<hex>
//	ConfigCheck <name> upstream-error <hcl's diagnostics>
//	DecodeCheck <name> ok|<error>
package main

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	gomsgpack "github.com/hashicorp/go-msgpack/codec"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"
)

// One hclspec node (plugins/shared/hclspec/hcl_spec.proto).
type sp struct {
	kind     string // attr block attrs list set map default literal object array
	name     string
	typ      string // attr, attrs: a type expression
	req      bool
	min, max uint64
	labels   []string
	value    string // literal: an HCL expression
	nested   *sp    // block, list, set, map; default: the primary
	def      *sp    // default: the fallback
	attrs    map[string]*sp
	values   []*sp // array
}

// The Spec message: its oneof field by kind.
func (s *sp) proto() []byte {
	var m []byte
	var n protowire.Number
	switch s.kind {
	case "object":
		n = 1
		keys := make([]string, 0, len(s.attrs))
		for k := range s.attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m = putMessage(m, 1, putMessage(putString(nil, 1, k), 2, s.attrs[k].proto()))
		}
	case "array":
		n = 2
		for _, v := range s.values {
			m = putMessage(m, 1, v.proto())
		}
	case "attr":
		n = 3
		m = putBool(putString(putString(nil, 1, s.name), 2, s.typ), 3, s.req)
	case "block":
		n = 4
		m = putMessage(putBool(putString(nil, 1, s.name), 2, s.req), 3, s.nested.proto())
	case "attrs":
		n = 5
		m = putBool(putString(putString(nil, 1, s.name), 2, s.typ), 3, s.req)
	case "list", "set":
		n = 6
		if s.kind == "set" {
			n = 7
		}
		m = putMessage(putVarint(putVarint(putString(nil, 1, s.name), 2, s.min), 3, s.max), 4, s.nested.proto())
	case "map":
		n = 8
		m = putString(nil, 1, s.name)
		for _, l := range s.labels {
			m = putString(m, 2, l)
		}
		m = putMessage(m, 3, s.nested.proto())
	case "default":
		n = 9
		m = putMessage(putMessage(nil, 1, s.nested.proto()), 2, s.def.proto())
	case "literal":
		n = 10
		m = putString(nil, 1, s.value)
	}
	return putMessage(nil, n, m)
}

func typeOf(expr string) cty.Type {
	e, d := hclsyntax.ParseExpression([]byte(expr), "proto", hcl.Pos{Line: 1, Column: 1})
	if d.HasErrors() {
		panic(d.Error())
	}
	t, d := typeexpr.TypeConstraint(e)
	if d.HasErrors() {
		panic(d.Error())
	}
	return t
}

// The hcldec spec Nomad's hclspecutils.Convert makes of the same node.
func (s *sp) dec() hcldec.Spec {
	switch s.kind {
	case "object":
		o := hcldec.ObjectSpec{}
		for k, v := range s.attrs {
			o[k] = v.dec()
		}
		return o
	case "array":
		var t hcldec.TupleSpec
		for _, v := range s.values {
			t = append(t, v.dec())
		}
		return t
	case "attr":
		return &hcldec.AttrSpec{Name: s.name, Type: typeOf(s.typ), Required: s.req}
	case "block":
		return &hcldec.BlockSpec{TypeName: s.name, Required: s.req, Nested: s.nested.dec()}
	case "attrs":
		return &hcldec.BlockAttrsSpec{TypeName: s.name, ElementType: typeOf(s.typ), Required: s.req}
	case "list":
		return &hcldec.BlockListSpec{TypeName: s.name, MinItems: int(s.min), MaxItems: int(s.max), Nested: s.nested.dec()}
	case "set":
		return &hcldec.BlockSetSpec{TypeName: s.name, MinItems: int(s.min), MaxItems: int(s.max), Nested: s.nested.dec()}
	case "map":
		return &hcldec.BlockMapSpec{TypeName: s.name, LabelNames: s.labels, Nested: s.nested.dec()}
	case "default":
		return &hcldec.DefaultSpec{Primary: s.nested.dec(), Default: s.def.dec()}
	case "literal":
		e, d := hclsyntax.ParseExpression([]byte(s.value), "proto", hcl.Pos{Line: 1, Column: 1})
		if d.HasErrors() {
			panic(d.Error())
		}
		v, d := e.Value(&hcl.EvalContext{})
		if d.HasErrors() {
			panic(d.Error())
		}
		return &hcldec.LiteralSpec{Value: v}
	}
	panic("kind " + s.kind)
}

func attr(name, typ string, req bool) *sp { return &sp{kind: "attr", name: name, typ: typ, req: req} }
func def(primary *sp, literal string) *sp {
	return &sp{kind: "default", nested: primary, def: &sp{kind: "literal", value: literal}}
}
func object(a map[string]*sp) *sp { return &sp{kind: "object", attrs: a} }

// Shaped like the task configs of Nomad's container drivers (docker,
// podman), plus one node of every other kind.
func checkSchema() *sp {
	return object(map[string]*sp{
		"command":           attr("command", "string", true),
		"image":             attr("image", "string", false),
		"args":              attr("args", "list(string)", false),
		"port_map":          attr("port_map", "list(map(number))", false),
		"labels":            attr("labels", "list(map(string))", false),
		"memory_hard_limit": attr("memory_hard_limit", "number", false),
		"force_pull":        attr("force_pull", "bool", false),
		"ratio":             attr("ratio", "number", false),
		"big":               attr("big", "number", false),
		"frac":              attr("frac", "number", false),
		"nums":              attr("nums", "list(number)", false),
		"tags":              attr("tags", "set(string)", false),
		"anyv":              attr("anyv", "any", false),
		"obj":               attr("obj", "object({a = string, b = number})", false),
		"tup":               attr("tup", "tuple([string, number, bool])", false),
		"opt":               attr("opt", "string", false),
		"dns":               def(attr("dns", "list(string)", false), "[]"),
		"defmap":            def(attr("defmap", "map(string)", false), `{ a = "x", b = "y" }`),
		"shell":             def(attr("shell", "string", false), `"bash"`),
		"workers":           def(attr("workers", "number", false), "4"),
		"nset":              attr("nset", "set(number)", false),
		"bset":              attr("bset", "set(bool)", false),
		"mln":               attr("mln", "map(list(number))", false),
		"lobj":              attr("lobj", "list(object({a = string, b = list(number)}))", false),
		"many":              attr("many", "map(any)", false),
		"lany":              attr("lany", "list(any)", false),
		"lls":               attr("lls", "list(list(string))", false),
		"sobj":              attr("sobj", "set(object({k = string, n = number}))", false),
		"lit_str":           def(attr("lit_str", "string", false), `"tab\there \"q\" \u00e9 $${x} %%{y}"`),
		"lit_neg":           def(attr("lit_neg", "number", false), "-1.5e3"),
		"lit_list":          def(attr("lit_list", "list(map(number))", false), "[{ a = 1, b = 2 }, { c = 3 }]"),
		"lit_obj": def(attr("lit_obj", "any", false), `{
  "quoted key" = [true, null, 1] # a comment
  other = "x", n = 0.1
}`),
		"auth": {kind: "block", name: "auth", nested: object(map[string]*sp{
			"username": attr("username", "string", false),
			"password": attr("password", "string", false),
		})},
		"logging": {kind: "block", name: "logging", nested: object(map[string]*sp{
			"driver": def(attr("driver", "string", false), `"json-file"`),
			"config": attr("config", "list(map(string))", false),
		})},
		"mount": {kind: "list", name: "mount", max: 8, nested: object(map[string]*sp{
			"type":     def(attr("type", "string", false), `"volume"`),
			"target":   attr("target", "string", true),
			"source":   attr("source", "string", false),
			"readonly": def(attr("readonly", "bool", false), "false"),
		})},
		"volume": {kind: "set", name: "volume", nested: object(map[string]*sp{
			"source": attr("source", "string", true),
			"target": attr("target", "string", false),
		})},
		"ports": {kind: "map", name: "ports", labels: []string{"label"}, nested: object(map[string]*sp{
			"to":     attr("to", "number", false),
			"static": def(attr("static", "number", false), "0"),
		})},
		// A block with a default, as in the plugin configs of the docker
		// and podman drivers ({gc, volumes} = { enabled = true, ... }).
		"gc": def(&sp{kind: "block", name: "gc", nested: object(map[string]*sp{
			"image":       def(attr("image", "bool", false), "true"),
			"image_delay": def(attr("image_delay", "string", false), `"3m"`),
		})}, `{ image = true, image_delay = "3m" }`),
		"env_extra": {kind: "attrs", name: "env_extra", typ: "string"},
		"pair":      {kind: "array", values: []*sp{attr("pair_first", "string", false), attr("pair_second", "number", false)}},
		"fixed":     {kind: "literal", value: `{ on = true, n = 1.5 }`},
	})
}

// The plugin's own config, shaped like the podman driver's.
func pluginSchema() *sp {
	return object(map[string]*sp{
		"socket_path":      def(attr("socket_path", "string", false), `"unix:///run/podman/podman.sock"`),
		"recover_stopped":  def(attr("recover_stopped", "bool", false), "false"),
		"extra_labels":     attr("extra_labels", "list(string)", false),
		"client_timeout":   def(attr("client_timeout", "string", false), `"60s"`),
		"allow_privileged": def(attr("allow_privileged", "bool", false), "false"),
		"volumes": def(&sp{kind: "block", name: "volumes", nested: object(map[string]*sp{
			"enabled":      def(attr("enabled", "bool", false), "true"),
			"selinuxlabel": attr("selinuxlabel", "string", false),
		})}, `{ enabled = true, selinuxlabel = "z" }`),
	})
}

// SetConfig's msgpack_config against Nomad's encoding of -plugin-config
// ({} when none: the schema's defaults). Recorded as
// "SetConfigCheck match|mismatch got=... want=...|upstream-error ...".
func checkPluginConfig(got []byte) {
	text := pluginConfig
	if text == "" {
		text = "{}"
	}
	file, diags := hcljson.Parse([]byte(text), "plugin.json")
	var val cty.Value
	if !diags.HasErrors() {
		var d hcl.Diagnostics
		val, d = hcldec.Decode(file.Body, pluginSchema().dec(), &hcl.EvalContext{})
		diags = append(diags, d...)
	}
	if diags.HasErrors() {
		record("SetConfigCheck", "upstream-error "+strings.ReplaceAll(diags.Error(), "\n", "; "))
		return
	}
	want, err := ctymsgpack.Marshal(val, val.Type())
	switch {
	case err != nil:
		record("SetConfigCheck", "upstream-error "+err.Error())
	case string(want) == string(got):
		record("SetConfigCheck", "match")
	default:
		record("SetConfigCheck", fmt.Sprintf("mismatch got=%s want=%s", hex.EncodeToString(got), hex.EncodeToString(want)))
	}
}

// A driver's struct for the config, as Nomad drivers declare theirs.
type checkConfig struct {
	Command         string              `codec:"command"`
	Image           string              `codec:"image"`
	Args            []string            `codec:"args"`
	PortMap         []map[string]int    `codec:"port_map"`
	Labels          []map[string]string `codec:"labels"`
	MemoryHardLimit int64               `codec:"memory_hard_limit"`
	ForcePull       bool                `codec:"force_pull"`
	Ratio           float64             `codec:"ratio"`
	Big             interface{}         `codec:"big"`
	Frac            interface{}         `codec:"frac"`
	Nums            []interface{}       `codec:"nums"`
	Tags            []string            `codec:"tags"`
	Anyv            interface{}         `codec:"anyv"`
	Obj             struct {
		A string `codec:"a"`
		B int    `codec:"b"`
	} `codec:"obj"`
	Tup    []interface{}    `codec:"tup"`
	Opt    string           `codec:"opt"`
	DNS    []string         `codec:"dns"`
	LitStr string           `codec:"lit_str"`
	Nset   []float64        `codec:"nset"`
	Bset   []bool           `codec:"bset"`
	Mln    map[string][]int `codec:"mln"`
	Lobj   []struct {
		A string `codec:"a"`
		B []int  `codec:"b"`
	} `codec:"lobj"`
	Many map[string]interface{} `codec:"many"`
	Lany []interface{}          `codec:"lany"`
	Lls  [][]string             `codec:"lls"`
	Sobj []struct {
		K string `codec:"k"`
		N int    `codec:"n"`
	} `codec:"sobj"`
	LitNeg  float64           `codec:"lit_neg"`
	LitList []map[string]int  `codec:"lit_list"`
	LitObj  interface{}       `codec:"lit_obj"`
	Defmap  map[string]string `codec:"defmap"`
	Shell   string            `codec:"shell"`
	Workers int               `codec:"workers"`
	Auth    struct {
		Username string `codec:"username"`
		Password string `codec:"password"`
	} `codec:"auth"`
	Logging struct {
		Driver string              `codec:"driver"`
		Config []map[string]string `codec:"config"`
	} `codec:"logging"`
	Mount []struct {
		Type     string `codec:"type"`
		Target   string `codec:"target"`
		Source   string `codec:"source"`
		Readonly bool   `codec:"readonly"`
	} `codec:"mount"`
	Volume []struct {
		Source string `codec:"source"`
		Target string `codec:"target"`
	} `codec:"volume"`
	Ports map[string]struct {
		To     int `codec:"to"`
		Static int `codec:"static"`
	} `codec:"ports"`
	GC struct {
		Image      bool   `codec:"image"`
		ImageDelay string `codec:"image_delay"`
	} `codec:"gc"`
	EnvExtra map[string]string `codec:"env_extra"`
	Pair     []interface{}     `codec:"pair"`
	Fixed    struct {
		On bool    `codec:"on"`
		N  float64 `codec:"n"`
	} `codec:"fixed"`
}

// What Nomad's client makes of a task config's JSON, with the task's
// environment as variables (as Nomad's env builder gives them).
func nomadDecode(text string, env map[string]string) (cty.Value, hcl.Diagnostics) {
	vars := map[string]cty.Value{}
	for k, v := range env {
		if hclsyntax.ValidIdentifier(k) {
			vars[k] = cty.StringVal(v)
		}
	}
	file, diags := hcljson.Parse([]byte(text), "config.json")
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return hcldec.Decode(file.Body, checkSchema().dec(), &hcl.EvalContext{Variables: vars})
}

// nomad_driver -decide JSON: whether Nomad's client takes that task config
// ("ok") or not ("error: <diagnostics>"), for the tests' configs outpost must
// refuse at submission.
func decide(text string) {
	if _, diags := nomadDecode(text, nil); diags.HasErrors() {
		fmt.Println("error: " + strings.ReplaceAll(diags.Error(), "\n", "; "))
		return
	}
	fmt.Println("ok")
}

// Compares the host's encoding of the task config with Nomad's.
func checkTaskConfig(got []byte, env map[string]string) {
	text, ok := env["GO_CHECK_JSON"]
	if !ok {
		return
	}
	id := env["GO_CHECK_NAME"]
	val, diags := nomadDecode(text, env)
	if diags.HasErrors() {
		record("ConfigCheck", id+" upstream-error "+strings.ReplaceAll(diags.Error(), "\n", "; "))
		return
	}
	want, err := ctymsgpack.Marshal(val, val.Type())
	switch {
	case err != nil:
		record("ConfigCheck", id+" upstream-error "+err.Error())
	case string(want) == string(got):
		record("ConfigCheck", id+" match")
	default:
		record("ConfigCheck", fmt.Sprintf("%s mismatch got=%s want=%s", id, hex.EncodeToString(got), hex.EncodeToString(want)))
	}
	h := &gomsgpack.MsgpackHandle{} // Nomad's base.MsgpackHandle
	h.RawToString = true
	var c checkConfig
	if err := gomsgpack.NewDecoderBytes(got, h).Decode(&c); err != nil {
		record("DecodeCheck", id+" "+err.Error())
	} else {
		record("DecodeCheck", id+" ok")
	}
}
