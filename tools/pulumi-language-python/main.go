// Command pulumi-language-python is rocm-bake's Python language host for the Pulumi engine.
//
// The upstream host (module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)
// is not served by the Go module proxy this project can reach, while the SDK module
// github.com/pulumi/pulumi/sdk/v3 and pkg/v3 are. So this is a host of our own, on the SDK's
// gRPC definitions: it runs the program with the project's virtualenv through the SDK's own
// pulumi-language-python-exec script (installed beside this binary), reports the venv's
// packages and the plugins their pulumi-plugin.json files name, runs Python plugins (policy
// packs) in a virtualenv, runs either under debugpy for --attach-debugger, and generates Python
// through pkg/v3/codegen/python. Plugins are never acquired here: the engine loads them from
// the plugin cache, where `make setup` registered the ones built from pinned Go modules.
//
// The files of this package, one concern each: main.go (process lifetime: serve, follow the
// engine, exit with it), program.go (the virtualenv and Run), inventory.go (installed packages
// and plugins), plugin.go (RunPlugin), codegen.go (Generate*), link.go (Link), debug.go
// (--attach-debugger), install.go (InstallDependencies).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// version is set with -ldflags "-X main.version=..." to the SDK version it was built against.
var version = "0.0.0-dev"

// engineCheckInterval is how often the host asks the engine whether it is alive. Upstream's
// hosts ask every 5 minutes; a `kill -9` of the CLI must not leave us (and the program we run)
// behind that long, and one health RPC a second on loopback costs nothing measurable.
const engineCheckInterval = time.Second

// exitGrace is how long the host waits, once the engine is gone, for its children to stop
// before it exits regardless.
const exitGrace = 5 * time.Second

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execScript    string

	// ctx ends when the engine sends Cancel or dies: every child process we start is bound to
	// it, so none outlives the engine.
	ctx    context.Context
	cancel context.CancelFunc
	// engineGone ends when the engine stops answering: then the host itself exits.
	engineGone context.Context
	markGone   context.CancelFunc
	healthOnce sync.Once
}

func newHost(engineAddress, execScript string) *host {
	ctx, cancel := context.WithCancel(context.Background())
	gone, markGone := context.WithCancel(context.Background())
	return &host{engineAddress: engineAddress, execScript: execScript, ctx: ctx, cancel: cancel,
		engineGone: gone, markGone: markGone}
}

func main() {
	// The engine passes its logging and tracing flags first, then its own address.
	flags := flag.NewFlagSet("pulumi-language-python", flag.ContinueOnError)
	flags.String("tracing", "", "tracing endpoint (accepted, not used)")
	flags.Bool("logtostderr", false, "log to stderr (accepted, not used)")
	flags.Int("v", 0, "log verbosity (accepted, not used)")
	showVersion := flags.Bool("version", false, "print the version and exit")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(version)
		return
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	h := newHost(flags.Arg(0), filepath.Join(filepath.Dir(self), "pulumi-language-python-exec"))

	// Ctrl-C reaches the program and the engine too; the engine decides what to cancel, so the
	// host only stops taking new calls and lets the running ones finish.
	interrupted, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stopSignals()
	stop := make(chan bool)
	go func() {
		select {
		case <-interrupted.Done():
		case <-h.engineGone.Done():
			// The engine is gone: children are being stopped; exit even if a call is still
			// blocked on one.
			time.AfterFunc(exitGrace, func() { os.Exit(1) })
		}
		close(stop)
	}()
	if h.engineAddress != "" {
		if err := h.followEngine(); err != nil {
			fail(err)
		}
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: stop,
		Init: func(s *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(s, h)
			return nil
		},
	})
	if err != nil {
		fail(err)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
	os.Exit(1)
}

// followEngine ends h.ctx as soon as the engine stops answering its health service (it died,
// perhaps by `kill -9`, which gives it no chance to stop us).
func (h *host) followEngine() error {
	var err error
	h.healthOnce.Do(func() {
		err = rpcutil.Healthcheck(h.engineGone, h.engineAddress, engineCheckInterval, func() {
			h.cancel()
			h.markGone()
		})
	})
	return err
}

// Handshake: the engine's address may arrive here (attach mode) rather than on the command line.
func (h *host) Handshake(ctx context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
		if err := h.followEngine(); err != nil {
			return nil, fmt.Errorf("could not follow the engine's health: %w", err)
		}
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

// Cancel stops every program and plugin this host runs (the engine sends it when the user
// cancels); the host keeps serving until the engine closes it.
func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.cancel()
	return &emptypb.Empty{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// RuntimeOptionsPrompts asks nothing: `pulumi new` templates are not how this project starts.
func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

// boundTo is a context that ends with the request or with the host (engine gone, Cancel).
func (h *host) boundTo(ctx context.Context) (context.Context, context.CancelFunc) {
	bound, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	return bound, func() { stop(); cancel() }
}
