package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// debugReadyTimeout bounds the wait for debugpy to listen before the host gives up on it.
const debugReadyTimeout = time.Minute

// debugSession is one program or plugin started under debugpy (`--attach-debugger`): it waits
// on a loopback port for the IDE, which the engine tells the user about (StartDebugging).
type debugSession struct {
	port   int
	logDir string
}

// debugArgs are the interpreter arguments that start what follows under debugpy, waiting for a
// client on a free loopback port. debugpy ships with the pulumi SDK; its absence is one line.
func (py pythonEnv) debugArgs(ctx context.Context) ([]string, *debugSession, error) {
	if err := py.canImport(ctx, "debugpy"); err != nil {
		return nil, nil, fmt.Errorf("--attach-debugger needs debugpy: %s cannot import it (pip install debugpy "+
			"into that virtualenv)", py.Python)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, nil, fmt.Errorf("no free loopback port for the debugger: %w", err)
	}
	logDir, err := os.MkdirTemp("", "rocm-bake-debugpy-")
	if err != nil {
		return nil, nil, err
	}
	args := []string{"-Xfrozen_modules=off", "-m", "debugpy", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--wait-for-client", "--log-to", logDir}
	return args, &debugSession{port: port, logDir: logDir}, nil
}

func freeLoopbackPort() (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

func (d *debugSession) cleanup() { _ = os.RemoveAll(d.logDir) }

// waitReady polls debugpy's own log of process pid until its adapter accepts clients. (Probing
// the port would itself be taken for the IDE.)
func (d *debugSession) waitReady(ctx context.Context, pid int) error {
	log := filepath.Join(d.logDir, fmt.Sprintf("debugpy.server-%d.log", pid))
	ctx, cancel := context.WithTimeout(ctx, debugReadyTimeout)
	defer cancel()
	for {
		if data, err := os.ReadFile(log); err == nil && strings.Contains(string(data), "accepting incoming client connections") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("debugpy did not start listening on 127.0.0.1:%d (its log: %s)", d.port, log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// announce tells the engine where to attach (an `attach` launch configuration for a Python
// debugger); the CLI prints "Waiting for debugger to attach (on port N)...".
func (d *debugSession) announce(ctx context.Context, engineAddress string, pid int, name string) error {
	if engineAddress == "" {
		return errors.New("no engine address to announce the debugger to")
	}
	if err := d.waitReady(ctx, pid); err != nil {
		return err
	}
	config, err := structpb.NewStruct(map[string]any{
		"name": name, "type": "python", "request": "attach", "justMyCode": true,
		"connect": map[string]any{"host": "127.0.0.1", "port": d.port},
	})
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(engineAddress, grpc.WithTransportCredentials(insecure.NewCredentials()),
		rpcutil.GrpcChannelOptions())
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pulumirpc.NewEngineClient(conn).StartDebugging(ctx, &pulumirpc.StartDebuggingRequest{
		Config: config, Message: fmt.Sprintf("on port %d", d.port),
	})
	if err != nil {
		return fmt.Errorf("the engine refused the debug session: %w", err)
	}
	return nil
}
