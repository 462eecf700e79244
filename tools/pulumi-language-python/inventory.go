package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// inventoryScript prints, as JSON, what the virtualenv holds: each installed distribution (name,
// version, the pulumi-plugin.json it ships if any, the distributions it requires outside extras)
// and the name of the project at the root (its pyproject.toml), if it has one. One interpreter
// start reads it all from the installed metadata (RECORD files); the host decides what it means.
const inventoryScript = `
import importlib.metadata as md, json, os, re, sys
def norm(name): return re.sub(r"[-_.]+", "-", name).lower()
out, seen = [], set()
for dist in md.distributions():
    name = dist.metadata["Name"]
    if not name or norm(name) in seen: continue
    seen.add(norm(name))
    plugin = None
    for f in dist.files or ():
        if f.name == "pulumi-plugin.json":
            try: plugin = json.loads(f.read_text())
            except (OSError, ValueError): plugin = None
            break
    requires = [norm(re.match(r"\s*([A-Za-z0-9._-]+)", r).group(1)) for r in dist.requires or ()
                if re.match(r"\s*[A-Za-z0-9]", r) and not re.search(r"extra\s*==", r)]
    out.append({"name": norm(name), "version": dist.version, "plugin": plugin, "requires": requires})
project = ""
try:
    import tomllib
    with open(os.path.join(sys.argv[1], "pyproject.toml"), "rb") as f:
        project = norm(tomllib.load(f).get("project", {}).get("name", ""))
except (OSError, ImportError, ValueError):
    pass
print(json.dumps({"project": project, "packages": out}))
`

// installed is one distribution in the virtualenv.
type installed struct {
	Name     string                   `json:"name"`
	Version  string                   `json:"version"`
	Plugin   *plugin.PulumiPluginJSON `json:"plugin"`
	Requires []string                 `json:"requires"`
}

// venvInventory is what the virtualenv of one program holds.
type venvInventory struct {
	Project  string      `json:"project"`
	Packages []installed `json:"packages"`
}

// readInventory runs inventoryScript in the program's virtualenv.
func readInventory(ctx context.Context, info *pulumirpc.ProgramInfo) (venvInventory, error) {
	py, err := pythonFor(info)
	if err != nil {
		return venvInventory{}, err
	}
	out, err := py.command(ctx, "-c", inventoryScript, info.GetRootDirectory()).Output()
	if err != nil {
		return venvInventory{}, fmt.Errorf("listing the packages of %s: %w", py.Python, err)
	}
	return parseInventory(out)
}

func parseInventory(data []byte) (venvInventory, error) {
	var inv venvInventory
	if err := json.Unmarshal(data, &inv); err != nil {
		return venvInventory{}, fmt.Errorf("the package list of the virtualenv is not JSON: %w", err)
	}
	sort.Slice(inv.Packages, func(i, j int) bool { return inv.Packages[i].Name < inv.Packages[j].Name })
	return inv, nil
}

// direct is what the program itself depends on. When the project at the root is installed
// into its venv (pip install -e .), that is what its distribution requires; otherwise it is
// every distribution no other one requires (pip list --not-required).
func (inv venvInventory) direct() []installed {
	byName := map[string]installed{}
	for _, p := range inv.Packages {
		byName[p.Name] = p
	}
	if project, ok := byName[inv.Project]; ok && inv.Project != "" {
		out := []installed{}
		for _, name := range project.Requires {
			if p, ok := byName[name]; ok {
				out = append(out, p)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	required := map[string]bool{}
	for _, p := range inv.Packages {
		for _, r := range p.Requires {
			required[r] = true
		}
	}
	out := []installed{}
	for _, p := range inv.Packages {
		if !required[p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// withoutPlugins are Pulumi libraries known to need no resource plugin.
var withoutPlugins = map[string]bool{"pulumi": true, "pulumi-policy": true, "pulumi-esc-sdk": true}

// packages are the resource plugins the venv's Pulumi SDKs need, from their pulumi-plugin.json
// (name, version, server, parameterization), else from a `pulumi-NAME` distribution's version.
func (inv venvInventory) packages() []*pulumirpc.PackageDependency {
	out := []*pulumirpc.PackageDependency{}
	for _, p := range inv.Packages {
		meta := p.Plugin
		if meta == nil {
			if withoutPlugins[p.Name] || !strings.HasPrefix(p.Name, "pulumi-") {
				continue
			}
			meta = &plugin.PulumiPluginJSON{Resource: true}
		}
		if !meta.Resource {
			continue
		}
		name := meta.Name
		if name == "" {
			name = strings.TrimPrefix(p.Name, "pulumi-")
		}
		version := meta.Version
		if version == "" {
			v, ok := pluginVersion(p.Version)
			if !ok {
				continue // a version no plugin can carry (an epoch, a local label): nothing to ask for
			}
			version = v
		}
		if !strings.HasPrefix(version, "v") {
			version = "v" + version
		}
		out = append(out, &pulumirpc.PackageDependency{
			Name: name, Version: version, Kind: "resource", Server: meta.Server,
			Parameterization: parameterization(meta.Parameterization),
			Extension:        parameterization(meta.ExtensionParameterization),
		})
	}
	return out
}

func parameterization(p *plugin.PulumiParameterizationJSON) *pulumirpc.PackageParameterization {
	if p == nil {
		return nil
	}
	return &pulumirpc.PackageParameterization{Name: p.Name, Version: p.Version, Value: p.Value}
}

var pep440 = regexp.MustCompile(`^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?$`)

// pluginVersion is the semver of the plugin a PEP 440 package version was released with:
// at least three numbers; a1/b1/rc1 become -alpha.1/-beta.1/-rc.1; .postN and .devN become build
// metadata. false for what has no such form (epochs, local versions).
func pluginVersion(pkg string) (string, bool) {
	m := pep440.FindStringSubmatch(pkg)
	if m == nil {
		return "", false
	}
	numbers := strings.Split(m[1], ".")
	for len(numbers) < 3 {
		numbers = append(numbers, "0")
	}
	v := strings.Join(numbers, ".")
	if m[2] != "" {
		v += "-" + map[string]string{"a": "alpha", "b": "beta", "rc": "rc"}[m[2]] + "." + m[3]
	}
	build := ""
	if m[4] != "" {
		build += "post" + m[4]
	}
	if m[5] != "" {
		build += "dev" + m[5]
	}
	if build != "" {
		v += "+" + build
	}
	return v, true
}

// GetRequiredPackages: the plugins the installed Pulumi SDKs name, so `pulumi install` and
// `pulumi about` see them.
func (h *host) GetRequiredPackages(ctx context.Context, req *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	inv, err := readInventory(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	return &pulumirpc.GetRequiredPackagesResponse{Packages: inv.packages()}, nil
}

// GetRequiredPlugins is the same list for engines that still ask the older question.
func (h *host) GetRequiredPlugins(ctx context.Context, req *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	inv, err := readInventory(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	out := []*pulumirpc.PluginDependency{}
	for _, p := range inv.packages() {
		if p.Parameterization != nil {
			continue // a parameterized package cannot be said in this older form
		}
		out = append(out, &pulumirpc.PluginDependency{Name: p.Name, Version: p.Version, Kind: p.Kind, Server: p.Server})
	}
	return &pulumirpc.GetRequiredPluginsResponse{Plugins: out}, nil
}

// GetProgramDependencies: the program's own dependencies, or every installed distribution
// when the engine asks for transitive ones (`pulumi about --transitive`).
func (h *host) GetProgramDependencies(ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	inv, err := readInventory(ctx, req.GetInfo())
	if err != nil {
		return nil, err
	}
	listed := inv.Packages
	if !req.GetTransitiveDependencies() {
		listed = inv.direct()
	}
	out := make([]*pulumirpc.DependencyInfo, 0, len(listed))
	for _, p := range listed {
		out = append(out, &pulumirpc.DependencyInfo{Name: p.Name, Version: p.Version})
	}
	return &pulumirpc.GetProgramDependenciesResponse{Dependencies: out}, nil
}
