package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
)

// lockFile is a project's hashed lock (`make lock`). When it is there, `pulumi install` installs
// what `make setup` does: every pin with --require-hashes, then the project itself, editable and
// without its dependencies (pip's hash-checking mode refuses an unhashed `-e .`, and the policy
// pack and the registry's TLS step import the project from the venv).
const lockFile = "requirements.lock"

// installSteps is the commands InstallDependencies runs in root: the virtualenv when its python is
// missing, then the lock (hashes required) and the project, or requirements.txt for a project
// without a lock.
func installSteps(root, venv string) [][]string {
	python := filepath.Join(venv, "bin", "python")
	steps := [][]string{}
	if _, err := os.Stat(python); err != nil {
		steps = append(steps, []string{"python3", "-m", "venv", venv})
	}
	pip := func(args ...string) []string {
		return append([]string{python, "-m", "pip", "install", "--quiet"}, args...)
	}
	if _, err := os.Stat(filepath.Join(root, lockFile)); err == nil {
		return append(steps, pip("--require-hashes", "-r", lockFile), pip("--no-deps", "--no-build-isolation", "-e", "."))
	}
	return append(steps, pip("-r", "requirements.txt"))
}

// InstallDependencies makes the virtualenv if it is missing and installs the project into it
// (installSteps), which is what `pulumi install` (or `pulumi up` on a fresh clone) asks of a pip
// project. The plugins the installed SDKs name are then installed by the engine
// (GetRequiredPackages).
func (h *host) InstallDependencies(req *pulumirpc.InstallDependenciesRequest,
	stream grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse],
) error {
	info := req.GetInfo()
	root := info.GetRootDirectory()
	venv := venvOption(info)
	if venv == "" {
		return errors.New("Pulumi.yaml names no virtualenv runtime option: nothing to install into")
	}
	ctx, stop := h.boundTo(stream.Context())
	defer stop()
	out := &installWriter{stream: stream}
	for _, step := range installSteps(root, venv) {
		fmt.Fprintf(out, "$ %s\n", strings.Join(step, " "))
		cmd := exec.CommandContext(ctx, step[0], step[1:]...)
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(step, " "), err)
		}
	}
	return nil
}

type installWriter struct {
	stream grpc.ServerStreamingServer[pulumirpc.InstallDependenciesResponse]
}

func (w *installWriter) Write(p []byte) (int, error) {
	if err := w.stream.Send(&pulumirpc.InstallDependenciesResponse{Stdout: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}
