// A kubelet device plugin on grpc-go, the gRPC stack of every stock device
// plugin (Python's grpcio, the other tests' peer, is gRPC's C core). Built
// from Debian's golang-google-grpc-dev in GOPATH mode (no module proxy), by
// `make go-peers` (with wire.go); used by tests/integration/test_devices.sh.
// Messages are written and read with protowire by the field numbers of
// k8s.io/kubelet's deviceplugin/v1beta1 and pluginregistration/v1
// api.proto: no generated code.
//
//	device_plugin -dir DIR -socket NAME [-resource R] [-devices N]
//	              [-registry DIR] [-calls FILE]
//
// Serves v1beta1.DevicePlugin on DIR/NAME and registers through
// DIR/kubelet.sock (a blocking dial, as stock plugins do), or, with
// -registry, serves pluginregistration.Registration beside it on
// DIR/NAME for the plugin watcher. Devices dev0..dev{N-1}; SIGUSR1 flips
// their health (ListAndWatch sends the new list). Allocate answers an env
// GO_DEV_IDS, an annotation and /dev/null as a device node; preferred
// allocation picks the last available ID; PreStartContainer is required.
// Each RPC appends a line to FILE: "<Method> <device IDs...>".
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
)

var (
	dir      = flag.String("dir", "", "the device plugins dir (kubelet.sock)")
	sock     = flag.String("socket", "go.sock", "the plugin's socket name")
	resource = flag.String("resource", "example.com/godev", "the resource name")
	count    = flag.Int("devices", 2, "how many devices")
	registry = flag.String("registry", "", "register through this plugins_registry dir instead")
	calls    = flag.String("calls", "", "the calls log")

	mu      sync.Mutex
	healthy = true
	changed = make(chan struct{}, 1)
)

func record(format string, args ...interface{}) {
	if *calls == "" {
		return
	}
	f, err := os.OpenFile(*calls, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0644)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

func deviceList() []byte {
	mu.Lock()
	defer mu.Unlock()
	health := "Healthy"
	if !healthy {
		health = "Unhealthy"
	}
	var b []byte
	for i := 0; i < *count; i++ {
		b = putMessage(b, 1, putString(putString(nil, 1, fmt.Sprintf("dev%d", i)), 2, health))
	}
	return b
}

func options() []byte { return putBool(putBool(nil, 1, true), 2, true) }

func unary(name string, answer func([]byte) []byte) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(_ interface{}, _ context.Context, dec func(interface{}) error,
		_ grpc.UnaryServerInterceptor) (interface{}, error) {
		var in []byte
		if err := dec(&in); err != nil {
			return nil, err
		}
		out := answer(in)
		return &out, nil
	}}
}

var devicePlugin = grpc.ServiceDesc{
	ServiceName: "v1beta1.DevicePlugin",
	HandlerType: (*interface{})(nil),
	Methods: []grpc.MethodDesc{
		unary("GetDevicePluginOptions", func([]byte) []byte {
			record("GetDevicePluginOptions")
			return options()
		}),
		unary("GetPreferredAllocation", func(in []byte) []byte {
			var out []byte
			for _, req := range fields(in)[1] {
				available := stringsOf(req, 1)
				record("GetPreferredAllocation %s", strings.Join(available, " "))
				var r []byte
				if len(available) > 0 {
					r = putString(r, 1, available[len(available)-1])
				}
				out = putMessage(out, 1, r)
			}
			return out
		}),
		unary("Allocate", func(in []byte) []byte {
			var out []byte
			for _, req := range fields(in)[1] {
				ids := strings.Join(stringsOf(req, 1), ",")
				record("Allocate %s", ids)
				var r []byte
				r = putMapEntry(r, 1, "GO_DEV_IDS", ids)
				r = putMessage(r, 3, putString(putString(putString(nil, 1, "/dev/null"), 2, "/dev/null"), 3, "rw"))
				r = putMapEntry(r, 4, "example.com/go-ids", ids)
				out = putMessage(out, 1, r)
			}
			return out
		}),
		unary("PreStartContainer", func(in []byte) []byte {
			record("PreStartContainer %s", strings.Join(stringsOf(in, 1), " "))
			return nil
		}),
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "ListAndWatch",
		ServerStreams: true,
		Handler: func(_ interface{}, stream grpc.ServerStream) error {
			var in []byte
			if err := stream.RecvMsg(&in); err != nil {
				return err
			}
			record("ListAndWatch")
			for {
				list := deviceList()
				if err := stream.SendMsg(&list); err != nil {
					return err
				}
				select {
				case <-changed:
				case <-stream.Context().Done():
					return nil
				}
			}
		},
	}},
}

var registration = grpc.ServiceDesc{
	ServiceName: "pluginregistration.Registration",
	HandlerType: (*interface{})(nil),
	Methods: []grpc.MethodDesc{
		unary("GetInfo", func([]byte) []byte {
			record("GetInfo")
			b := putString(nil, 1, "DevicePlugin")
			b = putString(b, 2, *resource)
			return putString(b, 4, "v1beta1") // endpoint "": this socket
		}),
		unary("NotifyRegistrationStatus", func(in []byte) []byte {
			registered := len(in) > 1 && in[0] == 0x08 && in[1] == 1
			record("NotifyRegistrationStatus registered=%v %s", registered, strings.Join(stringsOf(in, 2), ""))
			return nil
		}),
	},
}

func register() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, filepath.Join(*dir, "kubelet.sock"), grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		log.Fatalf("dial kubelet.sock: %v", err)
	}
	defer conn.Close()
	req := putString(nil, 1, "v1beta1")
	req = putString(req, 2, *sock)
	req = putString(req, 3, *resource)
	req = putMessage(req, 4, options())
	var resp []byte
	if err := conn.Invoke(ctx, "/v1beta1.Registration/Register", &req, &resp, grpc.ForceCodec(codec{})); err != nil {
		record("Register error %v", err)
		log.Fatalf("Register: %v", err)
	}
	record("Register ok")
}

func main() {
	flag.Parse()
	log.SetPrefix("device_plugin: ")
	serveDir := *dir
	if *registry != "" {
		serveDir = *registry
	}
	path := filepath.Join(serveDir, *sock)
	os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer(grpc.CustomCodec(codec{}))
	server.RegisterService(&devicePlugin, nil)
	if *registry != "" {
		server.RegisterService(&registration, nil)
	}
	go server.Serve(lis)
	if *registry == "" {
		register()
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	for s := range signals {
		if s != syscall.SIGUSR1 {
			server.Stop()
			return
		}
		mu.Lock()
		healthy = !healthy
		mu.Unlock()
		record("health %v", healthy)
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}
