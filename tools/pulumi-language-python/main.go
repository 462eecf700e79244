// Command pulumi-language-python is rocm-bake's Python language host for the Pulumi engine.
//
// The upstream host (module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)
// is not served by the Go module proxy this project can reach, while the SDK module
// github.com/pulumi/pulumi/sdk/v3 is. So this is a small host of our own, on the SDK's
// gRPC definitions: it runs the program with the project's virtualenv through the
// SDK's own pulumi-language-python-exec script (installed beside this binary), and
// answers the engine's other calls with what a Python program needs. Plugins are
// never acquired here: the engine loads them from the plugin cache, where `make
// setup` registered the ones built from pinned Go modules.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// version is set with -ldflags "-X main.version=..." to the SDK version it was built against.
var version = "0.0.0-dev"

// exitAfterUserMessage is the exec script's exit status after it has already shown the error
// (PYTHON_PROCESS_EXITED_AFTER_SHOWING_USER_ACTIONABLE_MESSAGE_CODE): the engine should bail quietly.
const exitAfterUserMessage = 32

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	engineAddress string
	execScript    string
}

func main() {
	// The engine passes flags (tracing, logging) and then its address, which comes last.
	args := os.Args[1:]
	engineAddress := ""
	if len(args) > 0 {
		engineAddress = args[len(args)-1]
	}
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	h := &host{engineAddress: engineAddress, execScript: filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
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

// pythonFor is the interpreter of the project's virtualenv (Pulumi.yaml runtime option
// `virtualenv`, relative to the project root), else python3 on PATH.
func pythonFor(info *pulumirpc.ProgramInfo) (python string, venv string, err error) {
	root := info.GetRootDirectory()
	if opt := optionString(info.GetOptions(), "virtualenv"); opt != "" {
		venv = opt
		if !filepath.IsAbs(venv) {
			venv = filepath.Join(root, venv)
		}
		python = filepath.Join(venv, "bin", "python")
		if _, statErr := os.Stat(python); statErr != nil {
			return "", venv, fmt.Errorf("the virtualenv %s (Pulumi.yaml runtime option) has no bin/python: "+
				"run `pulumi install` or `make setup`", venv)
		}
		return python, venv, nil
	}
	python, err = exec.LookPath("python3")
	return python, "", err
}

func optionString(options *structpb.Struct, key string) string {
	if options == nil {
		return ""
	}
	if v, ok := options.GetFields()[key]; ok {
		return v.GetStringValue()
	}
	return ""
}

func withVenv(env []string, venv string) []string {
	if venv == "" {
		return env
	}
	out := []string{"VIRTUAL_ENV=" + venv}
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			out = append(out, "PATH="+filepath.Join(venv, "bin")+string(os.PathListSeparator)+kv[len("PATH="):])
		case strings.HasPrefix(kv, "PYTHONHOME="), strings.HasPrefix(kv, "VIRTUAL_ENV="):
		default:
			out = append(out, kv)
		}
	}
	return out
}

// Run executes the program once (a preview or an update) and reports how it ended.
func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	python, venv, err := pythonFor(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	program := req.GetInfo().GetProgramDirectory()
	if program == "" {
		program = req.GetProgram()
	}
	args := []string{"-u", h.execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
		"--organization", req.GetOrganization(),
		"--root_directory", req.GetInfo().GetRootDirectory(),
		program}
	args = append(args, req.GetArgs()...)
	// A stack with no config sends nil: the SDK expects {} and [] (json.Marshal(nil) is "null").
	configMap := req.GetConfig()
	if configMap == nil {
		configMap = map[string]string{}
	}
	config, err := json.Marshal(configMap)
	if err != nil {
		return nil, err
	}
	keys := req.GetConfigSecretKeys()
	if keys == nil {
		keys = []string{}
	}
	secretKeys, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(withVenv(os.Environ(), venv),
		"PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(secretKeys))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == exitAfterUserMessage:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exitErr):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run %s: %v", python, err)}, nil
	}
}

// Handshake: nothing to negotiate; the engine's address arrived on the command line.
func (h *host) Handshake(ctx context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	if req.GetEngineAddress() != "" {
		h.engineAddress = req.GetEngineAddress()
	}
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

// GetRequiredPlugins and GetRequiredPackages report nothing to acquire: the engine loads each
// provider at the version a resource registers, from the plugins `make setup` installed.
func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) RuntimeOptionsPrompts(context.Context, *pulumirpc.RuntimeOptionsRequest) (*pulumirpc.RuntimeOptionsResponse, error) {
	return &pulumirpc.RuntimeOptionsResponse{}, nil
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

func (h *host) About(_ context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	python, _, err := pythonFor(req.GetInfo())
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(python, "--version").Output()
	if err != nil {
		return nil, err
	}
	return &pulumirpc.AboutResponse{Executable: python, Version: strings.TrimPrefix(strings.TrimSpace(string(out)), "Python ")}, nil
}

// InstallDependencies makes the virtualenv if it is missing and installs requirements.txt into it,
// which is what `pulumi install` (or `pulumi up` on a fresh clone) asks of a pip project.
func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest,
	stream grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	info := req.GetInfo()
	root := info.GetRootDirectory()
	venvOpt := optionString(info.GetOptions(), "virtualenv")
	if venvOpt == "" {
		return errors.New("Pulumi.yaml names no virtualenv runtime option: nothing to install into")
	}
	venv := venvOpt
	if !filepath.IsAbs(venv) {
		venv = filepath.Join(root, venv)
	}
	out := &streamWriter{stream: stream}
	steps := [][]string{}
	if _, err := os.Stat(filepath.Join(venv, "bin", "python")); err != nil {
		steps = append(steps, []string{"python3", "-m", "venv", venv})
	}
	steps = append(steps, []string{filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "-r", "requirements.txt"})
	for _, step := range steps {
		fmt.Fprintf(out, "$ %s\n", strings.Join(step, " "))
		cmd := exec.Command(step[0], step[1:]...)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(step, " "), err)
		}
	}
	return nil
}

type streamWriter struct {
	stream grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse]
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if err := w.stream.Send(&pulumirpc.InstallDependenciesResponse{Stdout: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ io.Writer = (*streamWriter)(nil)
