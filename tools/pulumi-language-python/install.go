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

// InstallDependencies makes the virtualenv if it is missing and installs requirements.txt into it,
// which is what `pulumi install` (or `pulumi up` on a fresh clone) asks of a pip project. The
// plugins the installed SDKs name are then installed by the engine (GetRequiredPackages).
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
	steps := [][]string{}
	if _, err := os.Stat(filepath.Join(venv, "bin", "python")); err != nil {
		steps = append(steps, []string{"python3", "-m", "venv", venv})
	}
	steps = append(steps, []string{filepath.Join(venv, "bin", "python"), "-m", "pip", "install", "-r", "requirements.txt"})
	for _, step := range steps {
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
