package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
)

// Link adds SDKs generated locally (`pulumi convert` of a parameterized package, `pulumi package
// add`) to the program's requirements.txt through the SDK's pip toolchain, and says how to import
// them. The engine calls it on every `convert`, mostly with nothing to link.
func (h *host) Link(ctx context.Context, req *pulumirpc.LinkRequest) (*pulumirpc.LinkResponse, error) {
	if len(req.GetPackages()) == 0 {
		return &pulumirpc.LinkResponse{}, nil
	}
	info := req.GetInfo()
	packages := map[string]string{}
	var imports strings.Builder
	for _, dep := range req.GetPackages() {
		project, err := toolchain.LoadPyproject(dep.GetPath())
		if err != nil || project.Project == nil || project.Project.Name == "" {
			return nil, fmt.Errorf("the generated SDK in %s has no pyproject.toml naming its project: cannot link it",
				dep.GetPath())
		}
		packages[project.Project.Name] = dep.GetPath()
		fmt.Fprintf(&imports, "  import %s\n", sdkModule(dep.GetPath(), project.Project.Name))
	}
	tc, err := toolchain.ResolveToolchain(toolchain.PythonOptions{
		Root: info.GetRootDirectory(), ProgramDir: info.GetProgramDirectory(),
		Virtualenv: optionString(info.GetOptions(), "virtualenv"), Toolchain: toolchain.Pip,
	})
	if err != nil {
		return nil, err
	}
	if err := tc.LinkPackages(ctx, packages); err != nil {
		return nil, fmt.Errorf("adding the generated SDKs to requirements.txt: %w", err)
	}
	return &pulumirpc.LinkResponse{ImportInstructions: "Import the SDK in your Python code with:\n\n" + imports.String()}, nil
}

// sdkModule is the import name of a generated SDK: the package directory that holds its
// pulumi-plugin.json, else the distribution name with dashes made underscores.
func sdkModule(dir, distribution string) string {
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "pulumi-plugin.json"))
	if len(matches) == 1 {
		return filepath.Base(filepath.Dir(matches[0]))
	}
	if _, err := os.Stat(filepath.Join(dir, "src")); err == nil {
		if m, _ := filepath.Glob(filepath.Join(dir, "src", "*", "pulumi-plugin.json")); len(m) == 1 {
			return filepath.Base(filepath.Dir(m[0]))
		}
	}
	return strings.ReplaceAll(distribution, "-", "_")
}
