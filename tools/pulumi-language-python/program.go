package main

import (
	"bytes"
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
	"syscall"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/structpb"
)

// exitAfterUserMessage is the exec script's exit status after it has already shown the error
// (PYTHON_PROCESS_EXITED_AFTER_SHOWING_USER_ACTIONABLE_MESSAGE_CODE): the engine should bail quietly.
const exitAfterUserMessage = 32

// stopDelay is how long a child has, after SIGTERM, before it is killed.
const stopDelay = 3 * time.Second

// pythonEnv is the interpreter a program or plugin runs with, and the virtualenv it belongs to.
type pythonEnv struct {
	Python string
	Venv   string // "" when python3 comes from PATH
}

// pythonFor resolves the interpreter of a program or plugin: the `virtualenv` runtime option
// (relative to its root directory), else python3 on PATH (the `.tools/bin/pulumi` wrapper puts
// the project's .venv/bin first).
func pythonFor(info *pulumirpc.ProgramInfo) (pythonEnv, error) {
	root := info.GetRootDirectory()
	if venv := venvOption(info); venv != "" {
		python := filepath.Join(venv, "bin", "python")
		if _, err := os.Stat(python); err != nil {
			return pythonEnv{}, fmt.Errorf("the virtualenv %s (runtime option `virtualenv` of %s) has no bin/python: "+
				"run `pulumi install` or `make setup`", venv, root)
		}
		return pythonEnv{Python: python, Venv: venv}, nil
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return pythonEnv{}, errors.New("no `virtualenv` runtime option and no python3 on PATH")
	}
	return pythonEnv{Python: python}, nil
}

// venvOption is the absolute path the `virtualenv` runtime option names, or "".
func venvOption(info *pulumirpc.ProgramInfo) string {
	venv := optionString(info.GetOptions(), "virtualenv")
	if venv != "" && !filepath.IsAbs(venv) {
		venv = filepath.Join(info.GetRootDirectory(), venv)
	}
	return venv
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

// environ is env with the virtualenv activated: its bin first on PATH, VIRTUAL_ENV set, PYTHONHOME unset.
func (p pythonEnv) environ(env []string) []string {
	if p.Venv == "" {
		return env
	}
	out := []string{"VIRTUAL_ENV=" + p.Venv}
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			out = append(out, "PATH="+filepath.Join(p.Venv, "bin")+string(os.PathListSeparator)+kv[len("PATH="):])
		case strings.HasPrefix(kv, "PYTHONHOME="), strings.HasPrefix(kv, "VIRTUAL_ENV="):
		default:
			out = append(out, kv)
		}
	}
	return out
}

// command runs python with args in the virtualenv, stopped (SIGTERM, then SIGKILL) when ctx ends.
// SIGTERM, not SIGINT: the host stops a child only once the engine has cancelled or gone, and a
// Python child answers SIGINT with KeyboardInterrupt tracebacks that the engine shows above the
// one line that says what failed. A program only declares, so it has nothing to clean up; the
// user's own Ctrl-C still reaches every process in the group as SIGINT.
func (p pythonEnv) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.Python, args...)
	cmd.Env = p.environ(os.Environ())
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopDelay
	return cmd
}

// Run executes the program once (a preview or an update) and reports how it ended.
// With `--attach-debugger` the program starts under debugpy and waits for the IDE the engine
// names (StartDebugging).
func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	py, err := pythonFor(req.GetInfo())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	program := req.GetInfo().GetProgramDirectory()
	if program == "" {
		program = req.GetProgram()
	}
	if msg := py.syntaxError(ctx, program); msg != "" {
		return &pulumirpc.RunResponse{Error: msg}, nil
	}
	args := []string{"-u"}
	var debug *debugSession
	if req.GetAttachDebugger() {
		var debugArgs []string
		if debugArgs, debug, err = py.debugArgs(ctx); err != nil {
			return &pulumirpc.RunResponse{Error: err.Error()}, nil
		}
		defer debug.cleanup()
		args = append(args, debugArgs...)
	}
	args = append(args, h.execScript,
		"--monitor", req.GetMonitorAddress(),
		"--engine", h.engineAddress,
		"--project", req.GetProject(),
		"--stack", req.GetStack(),
		"--pwd", req.GetPwd(),
		"--dry_run", strconv.FormatBool(req.GetDryRun()),
		"--parallel", strconv.Itoa(int(req.GetParallel())),
		"--organization", req.GetOrganization(),
		"--root_directory", req.GetInfo().GetRootDirectory(),
		program)
	args = append(args, req.GetArgs()...)
	config, secretKeys, err := configEnv(req.GetConfig(), req.GetConfigSecretKeys())
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	runCtx, stop := h.boundTo(ctx)
	defer stop()
	cmd := py.command(runCtx, args...)
	cmd.Dir = req.GetPwd()
	cmd.Env = append(cmd.Env, "PULUMI_CONFIG="+config, "PULUMI_CONFIG_SECRET_KEYS="+secretKeys)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = h.start(runCtx, cmd, debug, "Pulumi: Program (Python)")
	if err == nil {
		err = cmd.Wait()
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return &pulumirpc.RunResponse{}, nil
	case runCtx.Err() != nil && h.ctx.Err() != nil:
		return &pulumirpc.RunResponse{Error: "the program was stopped: the engine cancelled or exited"}, nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() == exitAfterUserMessage:
		return &pulumirpc.RunResponse{Bail: true}, nil
	case errors.As(err, &exitErr):
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("Program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
	default:
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("could not run %s: %v", py.Python, err)}, nil
	}
}

// start starts cmd; under a debugger it then tells the engine where to attach, and stops cmd
// if that fails (it would wait for a client forever).
func (h *host) start(ctx context.Context, cmd *exec.Cmd, debug *debugSession, name string) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	if debug != nil {
		go func() {
			if err := debug.announce(ctx, h.engineAddress, cmd.Process.Pid, name); err != nil {
				fmt.Fprintf(os.Stderr, "pulumi-language-python: %v\n", err)
				_ = cmd.Process.Kill()
			}
		}()
	}
	return nil
}

// canImport fails when module cannot be imported by this interpreter.
func (p pythonEnv) canImport(ctx context.Context, module string) error {
	cmd := p.command(ctx, "-c", "import "+module)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd.Run()
}

// maxEnvString is the longest one environment string may be (Linux's MAX_ARG_STRLEN, 32 pages):
// exec refuses a longer one with "argument list too long", which names no key.
const maxEnvString = 32 * 4096

// fitsTheEnvironment refuses a config whose JSON (passed as one variable, name included) exec would
// refuse, naming its largest value: the key the user made too large.
func fitsTheEnvironment(name string, encoded int, config map[string]string) error {
	if len(name)+1+encoded < maxEnvString {
		return nil
	}
	largest := ""
	for key, value := range config {
		if largest == "" || len(value) > len(config[largest]) {
			largest = key
		}
	}
	return fmt.Errorf("%s: its value is %d KiB; the program and the policy pack receive the whole stack config in "+
		"one environment variable (%s), which may be at most %d KiB: keep large data in a file and name the file",
		largest, len(config[largest])/1024, name, maxEnvString/1024)
}

// compileCheck compiles one file and prints only what Python says about a syntax error in it.
const compileCheck = `import sys, traceback
path = sys.argv[1]
try:
    compile(open(path, "rb").read(), path, "exec")
except SyntaxError as exc:
    sys.stderr.write("".join(traceback.format_exception_only(exc)))
    sys.exit(1)
`

// syntaxError is what is wrong with the program's main file when it does not compile, else "".
// Run under the exec script, a syntax error there has no frame of the program's own, so the
// script shows its whole traceback: some 25 lines of the host's and runpy's frames above the one
// line that matters. Checked first, it is the file, the line and the error.
func (p pythonEnv) syntaxError(ctx context.Context, program string) string {
	main := program
	if info, err := os.Stat(program); err == nil && info.IsDir() {
		main = filepath.Join(program, "__main__.py")
	}
	if _, err := os.Stat(main); err != nil {
		return "" // the exec script says what is missing
	}
	cmd := exec.CommandContext(ctx, p.Python, "-I", "-S", "-c", compileCheck, main)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var exitErr *exec.ExitError
	if err := cmd.Run(); errors.As(err, &exitErr) && exitErr.ExitCode() == 1 && stderr.Len() > 0 {
		return "the program does not compile:\n" + strings.TrimRight(stderr.String(), "\n")
	}
	return ""
}

// configEnv is the stack config and its secret keys as the SDK reads them from the environment.
// A stack with no config sends nil: the SDK expects {} and [] (json.Marshal(nil) is "null").
func configEnv(config map[string]string, secretKeys []string) (string, string, error) {
	if config == nil {
		config = map[string]string{}
	}
	if secretKeys == nil {
		secretKeys = []string{}
	}
	c, err := json.Marshal(config)
	if err != nil {
		return "", "", err
	}
	if err := fitsTheEnvironment("PULUMI_CONFIG", len(c), config); err != nil {
		return "", "", err
	}
	k, err := json.Marshal(secretKeys)
	if err != nil {
		return "", "", err
	}
	return string(c), string(k), nil
}

// About names the interpreter and its version, and the toolchain.
func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	py, err := pythonFor(req.GetInfo())
	if err != nil {
		return nil, err
	}
	out, err := py.command(ctx, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", py.Python, err)
	}
	return &pulumirpc.AboutResponse{
		Executable: py.Python,
		Version:    strings.TrimPrefix(strings.TrimSpace(string(out)), "Python "),
		Metadata:   map[string]string{"toolchain": "pip", "host": "rocm-bake " + version},
	}, nil
}
