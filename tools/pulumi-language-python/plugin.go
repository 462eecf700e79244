package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	sdk "github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// analyzerKind is RunPluginRequest.Kind for a policy pack.
const analyzerKind = "analyzer"

// RunPlugin runs a Python plugin in its virtualenv (the `virtualenv` runtime option of its
// PulumiPlugin.yaml / PulumiPolicy.yaml, else python3 on PATH):
//
//   - a policy pack (kind analyzer) runs as `python -u -m pulumi.policy ARGS PACKDIR` in the
//     pack's directory, behind the SDK's PolicyProxy: the engine configures the stack through
//     the proxy, which starts the pack with PULUMI_PROJECT/STACK/CONFIG/DRY_RUN in its
//     environment (pulumi-policy reads them there) and then forwards every call to it;
//   - any other plugin runs its directory's __main__.py with ARGS, in the engine's directory.
//
// With `--attach-debugger plugins` the plugin starts under debugpy, as a program does.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	info := req.GetInfo()
	dir := info.GetProgramDirectory()
	if dir == "" {
		dir = req.GetProgram()
	}
	py, err := pythonFor(info)
	if err != nil {
		return err
	}
	ctx, stop := h.boundTo(server.Context())
	defer stop()

	args := []string{"-u"}
	var debug *debugSession
	if req.GetAttachDebugger() {
		var debugArgs []string
		if debugArgs, debug, err = py.debugArgs(ctx); err != nil {
			return err
		}
		defer debug.cleanup()
		args = append(args, debugArgs...)
	}
	var cmd *exec.Cmd
	if req.GetKind() == analyzerKind {
		if err := py.canImport(ctx, "pulumi.policy"); err != nil {
			return fmt.Errorf("policy pack %s: %s cannot import pulumi.policy: install pulumi-policy into that "+
				"virtualenv (or name one that has it as runtime option `virtualenv`)", dir, py.Python)
		}
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		cmd = py.command(ctx, append(append(append(args, "-m", "pulumi.policy"), req.GetArgs()...), dir)...)
		// In the engine's directory (the project's), as the program runs: a pack that takes defaults
		// from the project's files (rocm-bake's checkout record) sees the same ones the program saw.
		// pulumi.policy loads the pack from its absolute path, so the pack's own directory is not needed.
		cmd.Dir = req.GetPwd()
		if cmd.Dir == "" {
			cmd.Dir = dir
		}
	} else {
		if _, err := os.Stat(filepath.Join(dir, "__main__.py")); err != nil {
			return fmt.Errorf("plugin %s has no __main__.py: rocm-bake's Python host runs a plugin from its "+
				"__main__.py only (not as a built package)", dir)
		}
		cmd = py.command(ctx, append(append(args, dir), req.GetArgs()...)...)
		cmd.Dir = req.GetPwd()
	}

	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()

	var proxy *sdk.PolicyProxy
	if req.GetKind() == analyzerKind {
		// The proxy prints its own port first (the engine dials it); the pack's port is read
		// by the proxy from what the pack prints, and everything after that is passed on.
		proxy, stdout, err = sdk.NewPolicyProxy(ctx, stdout)
		if err != nil {
			return fmt.Errorf("could not start the policy pack proxy: %w", err)
		}
		config, err := proxy.AwaitConfiguration(ctx)
		if err != nil {
			return fmt.Errorf("the engine sent no stack configuration to policy pack %s: %w", dir, err)
		}
		env, err := policyEnv(config)
		if err != nil {
			return err
		}
		cmd.Env = append(cmd.Env, env...)
	}
	cmd.Env = append(cmd.Env, req.GetEnv()...)
	cmd.Stdout, cmd.Stderr = stdout, stderr

	if err := h.start(ctx, cmd, debug, fmt.Sprintf("Pulumi: Plugin (%s)", req.GetName())); err != nil {
		if proxy != nil {
			proxy.Abort(err)
		}
		return fmt.Errorf("could not start %s: %w", py.Python, err)
	}
	if proxy != nil {
		err = proxy.Attach(ctx, cmd) // waits for the pack to exit
	} else {
		err = cmd.Wait()
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return server.Send(&pulumirpc.RunPluginResponse{
			Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(exitErr.ExitCode())},
		})
	}
	if err != nil {
		return fmt.Errorf("plugin %s: %w", dir, err)
	}
	return closer.Close()
}

// policyEnv is the stack a policy pack checks, in the variables pulumi-policy reads.
func policyEnv(config *pulumirpc.AnalyzerStackConfigureRequest) ([]string, error) {
	if config == nil {
		return nil, nil
	}
	env := []string{}
	add := func(key, value string) {
		if value != "" {
			env = append(env, key+"="+value)
		}
	}
	add("PULUMI_ORGANIZATION", config.GetOrganization())
	add("PULUMI_PROJECT", config.GetProject())
	add("PULUMI_STACK", config.GetStack())
	add("PULUMI_DRY_RUN", strconv.FormatBool(config.GetDryRun()))
	if config.GetConfig() != nil {
		data, err := json.Marshal(config.GetConfig())
		if err != nil {
			return nil, fmt.Errorf("the stack configuration is not JSON: %w", err)
		}
		if err := fitsTheEnvironment("PULUMI_CONFIG", len(data), config.GetConfig()); err != nil {
			return nil, err
		}
		add("PULUMI_CONFIG", string(data))
	}
	return env, nil
}
