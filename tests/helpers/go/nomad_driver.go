// A Nomad task driver plugin served by hashicorp/go-plugin on grpc-go, as
// every stock Nomad driver is (the Python test driver of test_nomad.sh
// plays go-plugin's side itself). Built from Debian's
// golang-github-hashicorp-go-plugin-dev and golang-google-grpc-dev in
// GOPATH mode by `make go-peers` (with wire.go); used by tests/integration/test_nomad.sh.
// Messages by hand with protowire, by the field numbers of Nomad's
// plugins/base and plugins/drivers protos: no generated code.
//
//	nomad_driver [-calls FILE] [-check [-plugin-config JSON]]     (started by the host: go-plugin's handshake)
//	nomad_driver -decide JSON               (cty_check.go: does Nomad take this task config?)
//
// PluginInfo names it "godriver" (API v0.1.0); no plugin config. Its task
// config is {"command": "..."} (required), run with /bin/sh -c in a process
// group of its own, stdout and stderr into the FIFOs the host gives and the
// task's env. The handle's driver_state is the pid: RecoverTask takes a
// live pid back (its exit code is then unknown: 0, as after a reattach),
// refuses a dead one. SignalTask sends the named signal (HUP, TERM, USR1).
// Each call appends "<Method> <task id>" to FILE (the id empty for calls
// without one). -check: the plugin and task config schemas and the
// byte-for-byte checks of SetConfig's and each task's config against
// Nomad's own libraries of cty_check.go (the schema's "command" is still
// what runs); -plugin-config: the JSON of the plugin's config in the
// agent's config ({} when it has none).
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// msgpackCommand reads "command" from the task config as Nomad encodes it
// for this schema: a map of one string.
func msgpackCommand(b []byte) string {
	next := func() (string, bool) {
		if len(b) == 0 {
			return "", false
		}
		var n, skip int
		switch c := b[0]; {
		case c&0xe0 == 0xa0:
			n, skip = int(c&0x1f), 1
		case c == 0xd9 && len(b) > 1:
			n, skip = int(b[1]), 2
		case c == 0xda && len(b) > 2:
			n, skip = int(b[1])<<8|int(b[2]), 3
		default:
			return "", false
		}
		if len(b) < skip+n {
			return "", false
		}
		s := string(b[skip : skip+n])
		b = b[skip+n:]
		return s, true
	}
	if len(b) == 0 || b[0]&0xf0 != 0x80 {
		return ""
	}
	entries := int(b[0] & 0x0f)
	b = b[1:]
	for i := 0; i < entries; i++ {
		k, ok1 := next()
		v, ok2 := next()
		if !ok1 || !ok2 {
			return ""
		}
		if k == "command" {
			return v
		}
	}
	return ""
}

type task struct {
	pid      int
	done     chan struct{}
	exitCode int
	signal   int
}

var (
	calls        = ""
	pluginConfig = ""
	check        = false // -check: cty_check.go's schema, each task's config compared with Nomad's encoding
	mu           sync.Mutex
	tasks        = map[string]*task{}
)

func record(method, id string) {
	if calls == "" {
		return
	}
	if f, err := os.OpenFile(calls, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0644); err == nil {
		fmt.Fprintf(f, "%s %s\n", method, id)
		f.Close()
	}
}

func lookup(id string) (*task, error) {
	mu.Lock()
	defer mu.Unlock()
	if t := tasks[id]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("task not found for given id")
}

func unary(name string, answer func([]byte) ([]byte, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(_ interface{}, _ context.Context, dec func(interface{}) error,
		_ grpc.UnaryServerInterceptor) (interface{}, error) {
		var in []byte
		if err := dec(&in); err != nil {
			return nil, err
		}
		if name != "StartTask" && name != "RecoverTask" { // they record the id inside
			record(name, string(first(fields(in), 1)))
		}
		out, err := answer(in)
		if err != nil {
			return nil, err
		}
		return &out, nil
	}}
}

// The task config's schema: object { command = attr("command", "string", required) }.
func taskSchema() []byte {
	attr := putVarint(putString(putString(nil, 1, "command"), 2, "string"), 3, 1)
	entry := putMessage(putString(nil, 1, "command"), 2, putMessage(nil, 3, attr))
	return putMessage(nil, 1, putMessage(nil, 1, entry))
}

func startTask(in []byte) ([]byte, error) {
	config := first(fields(in), 1)
	c := fields(config)
	id := string(first(c, 1))
	record("StartTask", id)
	fatal := func(err error) ([]byte, error) {
		return putString(putVarint(nil, 1, 2), 2, err.Error()), nil // FATAL
	}
	var env []string
	envMap := map[string]string{}
	for _, e := range c[4] {
		kv := fields(e)
		env = append(env, string(first(kv, 1))+"="+string(first(kv, 2)))
		envMap[string(first(kv, 1))] = string(first(kv, 2))
	}
	if check {
		checkTaskConfig(first(c, 3), envMap)
	}
	stdout, err := os.OpenFile(string(first(c, 11)), os.O_WRONLY, 0)
	if err != nil {
		return fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(string(first(c, 12)), os.O_WRONLY, 0)
	if err != nil {
		return fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command("/bin/sh", "-c", msgpackCommand(first(c, 3)))
	cmd.Env, cmd.Stdout, cmd.Stderr = env, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fatal(err)
	}
	t := &task{pid: cmd.Process.Pid, done: make(chan struct{})}
	mu.Lock()
	tasks[id] = t
	mu.Unlock()
	go func() {
		cmd.Wait()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			t.signal = int(ws.Signal())
		} else {
			t.exitCode = ws.ExitStatus()
		}
		close(t.done)
	}()
	handle := putVarint(nil, 1, 1)
	handle = putMessage(handle, 2, config)
	handle = putVarint(handle, 3, 1) // RUNNING
	handle = putMessage(handle, 4, []byte(strconv.Itoa(t.pid)))
	return putMessage(nil, 3, handle), nil
}

// alive: pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// Nomad's client sends the handle alone (task_id stays empty): the id is
// the handle's config's, as Nomad's drivers read it.
func recoverTask(in []byte) ([]byte, error) {
	handle := fields(first(fields(in), 2))
	id := string(first(fields(first(handle, 2)), 1))
	record("RecoverTask", id)
	state := first(handle, 4)
	pid, err := strconv.Atoi(string(state))
	if err != nil || !alive(pid) {
		return nil, fmt.Errorf("task %s: process %q is gone", id, state)
	}
	t := &task{pid: pid, done: make(chan struct{})}
	go func() {
		for alive(pid) {
			time.Sleep(50 * time.Millisecond)
		}
		close(t.done)
	}()
	mu.Lock()
	tasks[id] = t
	mu.Unlock()
	return nil, nil
}

var signals = map[string]syscall.Signal{"HUP": syscall.SIGHUP, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"SIGHUP": syscall.SIGHUP, "SIGTERM": syscall.SIGTERM, "SIGUSR1": syscall.SIGUSR1}

type driver struct{ plugin.Plugin }

func (driver) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "hashicorp.nomad.plugins.base.proto.BasePlugin",
		HandlerType: (*interface{})(nil),
		Methods: []grpc.MethodDesc{
			unary("PluginInfo", func([]byte) ([]byte, error) {
				b := putVarint(nil, 1, 2) // DRIVER
				b = putString(b, 2, "v0.1.0")
				b = putString(b, 3, "0.0.1")
				return putString(b, 4, "godriver"), nil
			}),
			unary("ConfigSchema", func([]byte) ([]byte, error) {
				if check {
					return putMessage(nil, 1, pluginSchema().proto()), nil
				}
				return nil, nil
			}),
			unary("SetConfig", func(in []byte) ([]byte, error) {
				if check {
					checkPluginConfig(first(fields(in), 1))
				}
				return nil, nil
			}),
		},
	}, struct{}{})
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "hashicorp.nomad.plugins.drivers.proto.Driver",
		HandlerType: (*interface{})(nil),
		Methods: []grpc.MethodDesc{
			unary("TaskConfigSchema", func([]byte) ([]byte, error) {
				if check {
					return putMessage(nil, 1, checkSchema().proto()), nil
				}
				return putMessage(nil, 1, taskSchema()), nil
			}),
			unary("Capabilities", func([]byte) ([]byte, error) {
				return putMessage(nil, 1, putVarint(putVarint(nil, 1, 1), 6, 1)), nil // signals; no mounts
			}),
			unary("StartTask", startTask),
			unary("RecoverTask", recoverTask),
			unary("WaitTask", func(in []byte) ([]byte, error) {
				t, err := lookup(string(first(fields(in), 1)))
				if err != nil {
					return nil, err
				}
				<-t.done
				return putMessage(nil, 1, putVarint(putVarint(nil, 1, uint64(t.exitCode)), 2, uint64(t.signal))), nil
			}),
			unary("StopTask", func(in []byte) ([]byte, error) {
				t, err := lookup(string(first(fields(in), 1)))
				if err != nil {
					return nil, err
				}
				syscall.Kill(-t.pid, syscall.SIGTERM)
				select {
				case <-t.done:
				case <-time.After(5 * time.Second):
					syscall.Kill(-t.pid, syscall.SIGKILL)
					<-t.done
				}
				return nil, nil
			}),
			unary("DestroyTask", func(in []byte) ([]byte, error) {
				id := string(first(fields(in), 1))
				mu.Lock()
				t := tasks[id]
				delete(tasks, id)
				mu.Unlock()
				if t != nil {
					syscall.Kill(-t.pid, syscall.SIGKILL)
				}
				return nil, nil
			}),
			unary("InspectTask", func(in []byte) ([]byte, error) {
				id := string(first(fields(in), 1))
				t, err := lookup(id)
				if err != nil {
					return nil, err
				}
				state := uint64(1)
				select {
				case <-t.done:
					state = 2
				default:
				}
				return putMessage(nil, 1, putVarint(putString(nil, 1, id), 3, state)), nil
			}),
			unary("SignalTask", func(in []byte) ([]byte, error) {
				f := fields(in)
				t, err := lookup(string(first(f, 1)))
				if err != nil {
					return nil, err
				}
				sig, ok := signals[string(first(f, 2))]
				if !ok {
					return nil, fmt.Errorf("unknown signal %q", first(f, 2))
				}
				return nil, syscall.Kill(t.pid, sig)
			}),
		},
		Streams: []grpc.StreamDesc{
			{StreamName: "Fingerprint", ServerStreams: true, Handler: func(_ interface{}, stream grpc.ServerStream) error {
				var in []byte
				if err := stream.RecvMsg(&in); err != nil {
					return err
				}
				health := putString(putVarint(nil, 2, 2), 3, "Healthy (grpc-go)") // HEALTHY
				if err := stream.SendMsg(&health); err != nil {
					return err
				}
				<-stream.Context().Done()
				return nil
			}},
			{StreamName: "TaskEvents", ServerStreams: true, Handler: func(_ interface{}, stream grpc.ServerStream) error {
				var in []byte
				if err := stream.RecvMsg(&in); err != nil {
					return err
				}
				<-stream.Context().Done()
				return nil
			}},
		},
	}, struct{}{})
	return nil
}

func (driver) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (interface{}, error) {
	return nil, fmt.Errorf("a plugin, not a host")
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-decide" {
		decide(os.Args[2])
		return
	}
	for i := 1; i < len(os.Args); i++ {
		switch {
		case os.Args[i] == "-calls" && i+1 < len(os.Args):
			i++
			calls = os.Args[i]
		case os.Args[i] == "-check":
			check = true
		case os.Args[i] == "-plugin-config" && i+1 < len(os.Args):
			i++
			pluginConfig = os.Args[i]
		}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: plugin.HandshakeConfig{ // Nomad's plugins/base Handshake
			ProtocolVersion:  2,
			MagicCookieKey:   "NOMAD_PLUGIN_MAGIC_COOKIE",
			MagicCookieValue: "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255",
		},
		Plugins: map[string]plugin.Plugin{"driver": driver{}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.CustomCodec(codec{}))...)
		},
	})
}
