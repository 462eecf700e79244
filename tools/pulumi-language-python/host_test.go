package main

// Tests of the host against real Python (python3 on PATH) and real gRPC: the host process
// itself (re-executed from this test binary), a stand-in engine that serves the gRPC health
// service, and a stand-in exec script. No mock of the host's own code.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// asHost makes this test binary act as the host when re-executed with the variable set.
const asHost = "ROCM_BAKE_TEST_RUN_AS_HOST"

func TestMain(m *testing.M) {
	if os.Getenv(asHost) != "" {
		os.Args = append([]string{"pulumi-language-python"}, strings.Fields(os.Getenv(asHost))...)
		main()
		return
	}
	os.Exit(m.Run())
}

func python3(t *testing.T) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not on PATH: the host runs Python; install python3")
	}
	return python
}

// -- versions and the package inventory -----------------------------------------------------

func TestPluginVersionFromPEP440(t *testing.T) {
	cases := map[string]string{
		"0.0.22":       "0.0.22",
		"3.1":          "3.1.0",
		"4":            "4.0.0",
		"1.2.3a4":      "1.2.3-alpha.4",
		"1.2.3b1":      "1.2.3-beta.1",
		"1.2.3rc2":     "1.2.3-rc.2",
		"1.2.3.post4":  "1.2.3+post4",
		"1.2.3.dev5":   "1.2.3+dev5",
		"1.2.3rc1.dev": "",
		"1!2.0":        "",
		"1.0+local":    "",
	}
	for pkg, want := range cases {
		got, ok := pluginVersion(pkg)
		if want == "" {
			if ok {
				t.Errorf("pluginVersion(%q) = %q, want no plugin version", pkg, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("pluginVersion(%q) = %q, %v; want %q", pkg, got, ok, want)
		}
	}
}

const inventoryJSON = `{"project": "rocm-bake", "packages": [
 {"name": "rocm-bake", "version": "0.1.0", "plugin": null, "requires": ["pulumi", "pulumi-docker-build", "pydantic"]},
 {"name": "pulumi-docker-build", "version": "0.0.22", "plugin": {"resource": true, "name": "docker-build", "version": "0.0.22"}, "requires": ["pulumi"]},
 {"name": "pulumi", "version": "3.272.0", "plugin": {"resource": false}, "requires": ["grpcio"]},
 {"name": "pulumi-policy", "version": "1.21.0", "plugin": null, "requires": ["pulumi"]},
 {"name": "pulumi-random", "version": "4.16.0rc1", "plugin": null, "requires": []},
 {"name": "pulumi-ext", "version": "1.0.0", "plugin": {"resource": true, "name": "terraform-provider", "version": "0.8.0", "server": "https://example.invalid",
   "parameterization": {"name": "ext", "version": "1.0.0", "value": "eyJ4IjoxfQ=="}}, "requires": []},
 {"name": "pydantic", "version": "2.13.4", "plugin": null, "requires": ["typing-extensions"]},
 {"name": "grpcio", "version": "1.66.2", "plugin": null, "requires": []},
 {"name": "typing-extensions", "version": "4.12.2", "plugin": null, "requires": []},
 {"name": "pytest", "version": "9.0.3", "plugin": null, "requires": []}
]}`

func TestPackagesComeFromPluginMetadata(t *testing.T) {
	inv, err := parseInventory([]byte(inventoryJSON))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range inv.packages() {
		got[p.Name] = p.Version
		if p.Name == "terraform-provider" {
			if p.Server != "https://example.invalid" || p.Parameterization.GetName() != "ext" ||
				string(p.Parameterization.GetValue()) != `{"x":1}` {
				t.Errorf("parameterized package lost its server or parameterization: %v", p)
			}
		}
	}
	want := map[string]string{"docker-build": "v0.0.22", "random": "v4.16.0-rc.1", "terraform-provider": "v0.8.0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("packages = %v, want %v (pulumi has resource:false, pulumi-policy has no plugin)", got, want)
	}
}

func TestDirectDependenciesAreWhatTheInstalledProjectRequires(t *testing.T) {
	inv, err := parseInventory([]byte(inventoryJSON))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(inv.direct()); got != "pulumi pulumi-docker-build pydantic" {
		t.Errorf("direct deps of the installed project = %q", got)
	}
	inv.Project = "" // a program that is not itself installed: what nothing else requires
	if got := names(inv.direct()); got != "pulumi-ext pulumi-policy pulumi-random pytest rocm-bake" {
		t.Errorf("direct deps without a project = %q", got)
	}
}

func names(ps []installed) string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return strings.Join(out, " ")
}

// fakeSitePackages lays out two installed distributions the way pip does (dist-info with
// METADATA and RECORD): one SDK that ships pulumi-plugin.json, one plain library.
func fakeSitePackages(t *testing.T) string {
	t.Helper()
	site := t.TempDir()
	write := func(rel, text string) {
		path := filepath.Join(site, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pulumi_fake_build/pulumi-plugin.json", `{"resource": true, "name": "fake-build", "version": "1.2.3"}`)
	write("pulumi_fake_build-1.2.3.dist-info/METADATA",
		"Metadata-Version: 2.1\nName: pulumi_fake_build\nVersion: 1.2.3\nRequires-Dist: plain-lib>=1\n"+
			"Requires-Dist: pytest ; extra == \"test\"\n")
	write("pulumi_fake_build-1.2.3.dist-info/RECORD",
		"pulumi_fake_build/pulumi-plugin.json,,\npulumi_fake_build-1.2.3.dist-info/METADATA,,\n")
	write("plain_lib-0.5.dist-info/METADATA", "Metadata-Version: 2.1\nName: Plain.Lib\nVersion: 0.5\n")
	write("plain_lib-0.5.dist-info/RECORD", "plain_lib-0.5.dist-info/METADATA,,\n")
	return site
}

func TestInventoryReadsTheInstalledMetadata(t *testing.T) {
	python3(t)
	t.Setenv("PYTHONPATH", fakeSitePackages(t))
	t.Setenv("PYTHONNOUSERSITE", "1")
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "pyproject.toml"), []byte("[project]\nname = \"Pulumi_Fake.Build\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := readInventory(context.Background(), &pulumirpc.ProgramInfo{RootDirectory: root})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Project != "pulumi-fake-build" {
		t.Errorf("project = %q, want the normalized pyproject name", inv.Project)
	}
	byName := map[string]installed{}
	for _, p := range inv.Packages {
		byName[p.Name] = p
	}
	sdk, lib := byName["pulumi-fake-build"], byName["plain-lib"]
	if sdk.Plugin == nil || sdk.Plugin.Name != "fake-build" || sdk.Version != "1.2.3" {
		t.Fatalf("the SDK's pulumi-plugin.json was not read: %+v", sdk)
	}
	if strings.Join(sdk.Requires, ",") != "plain-lib" {
		t.Errorf("requires = %v, want plain-lib only (the test extra is not a requirement)", sdk.Requires)
	}
	if lib.Version != "0.5" || lib.Plugin != nil {
		t.Errorf("plain library = %+v", lib)
	}
	if got := names(inv.direct()); got != "plain-lib" {
		t.Errorf("direct deps of the installed project = %q", got)
	}
}

// -- the host process, a stand-in engine, and the engine's death ------------------------------

// fakeEngine serves the gRPC health service on a free loopback port, as the engine does.
func fakeEngine(t *testing.T) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), srv.Stop
}

// hostProcess is this test binary run as the host, with execScript beside it.
type hostProcess struct {
	cmd    *exec.Cmd
	client pulumirpc.LanguageRuntimeClient
	exited chan error
	stderr *lockedBuffer // what the host and its children wrote to stderr (the engine shows it)
}

// lockedBuffer is a bytes.Buffer safe to write from the copying goroutine and read from the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startHost(t *testing.T, engineAddr, execScript string) *hostProcess {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pulumi-language-python")
	if err := os.Link(self, bin); err != nil {
		data, rerr := os.ReadFile(self)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if execScript != "" {
		if err := os.WriteFile(filepath.Join(dir, "pulumi-language-python-exec"), []byte(execScript), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), asHost+"=-v=9 "+engineAddr)
	captured := &lockedBuffer{}
	cmd.Stderr = io.MultiWriter(os.Stderr, captured)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &hostProcess{cmd: cmd, exited: make(chan error, 1), stderr: captured}
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the host printed no port: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout); h.exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	conn, err := grpc.NewClient("127.0.0.1:"+strings.TrimSpace(port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h.client = pulumirpc.NewLanguageRuntimeClient(conn)
	return h
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// A program that records its pid and then sleeps, as a long `pulumi up` step would, deaf to
// SIGTERM (so the host must kill it).
const sleepingExec = `#!/usr/bin/env python3
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.environ["PIDFILE"], "w").write(str(os.getpid()))
time.sleep(300)
`

// A program with Python's own signal handling that records its pid and sleeps: stopped by
// SIGINT it would print a KeyboardInterrupt traceback.
const plainSleepingExec = `#!/usr/bin/env python3
import os, time
open(os.environ["PIDFILE"], "w").write(str(os.getpid()))
time.sleep(300)
`

// runUntilPid starts Run on h with a "virtualenv" whose python exports PIDFILE, and returns the
// program's pid once it has started.
func runUntilPid(t *testing.T, h *hostProcess) (pid int, runDone chan error) {
	t.Helper()
	python := python3(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	venv := t.TempDir()
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\nPIDFILE=%s exec %s \"$@\"\n", pidFile, python)
	if err := os.WriteFile(filepath.Join(venv, "bin", "python"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": venv})
	runDone = make(chan error, 1)
	go func() {
		_, err := h.client.Run(context.Background(), &pulumirpc.RunRequest{
			Pwd: t.TempDir(), Info: &pulumirpc.ProgramInfo{RootDirectory: venv, ProgramDirectory: venv, Options: options},
		})
		runDone <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); pid == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program never started")
		}
		if data, err := os.ReadFile(pidFile); err == nil && len(data) > 0 {
			fmt.Sscan(string(data), &pid)
		}
	}
	return pid, runDone
}

// When the engine cancels (a provider failed, say), the program is stopped at once and says
// nothing: no KeyboardInterrupt traceback lands above the engine's one line of what failed.
func TestCancelledProgramStopsAtOnceWithoutATraceback(t *testing.T) {
	engineAddr, stopEngine := fakeEngine(t)
	defer stopEngine()
	h := startHost(t, engineAddr, plainSleepingExec)
	pid, runDone := runUntilPid(t, h)
	if _, err := h.client.Cancel(context.Background(), &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-runDone:
	case <-time.After(stopDelay):
		t.Fatalf("Run had not returned %v after Cancel: the program was not stopped by the signal", stopDelay)
	}
	if alive(pid) {
		t.Fatalf("the program (pid %d) is still running after Cancel", pid)
	}
	if out := h.stderr.String(); strings.Contains(out, "Traceback") || strings.Contains(out, "KeyboardInterrupt") {
		t.Fatalf("the stopped program printed a traceback (the engine would show it):\n%s", out)
	}
}

func TestHostAndItsProgramExitWhenTheEngineDies(t *testing.T) {
	engineAddr, stopEngine := fakeEngine(t)
	h := startHost(t, engineAddr, sleepingExec)
	pid, _ := runUntilPid(t, h)

	stopEngine() // as kill -9 of the CLI does: the engine stops answering
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the host is still running 10 s after the engine died")
	}
	for deadline := time.Now().Add(stopDelay + 2*time.Second); alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the program (pid %d) outlived the host and the engine", pid)
		}
	}
}

func TestHostKeepsServingWhileTheEngineLives(t *testing.T) {
	engineAddr, stopEngine := fakeEngine(t)
	defer stopEngine()
	h := startHost(t, engineAddr, "")
	time.Sleep(3 * engineCheckInterval)
	info, err := h.client.GetPluginInfo(context.Background(), nil)
	if err != nil {
		t.Fatalf("the host stopped serving while the engine was alive: %v", err)
	}
	if info.GetVersion() == "" {
		t.Error("no version")
	}
}

func TestAttachDebuggerWithoutDebugpyIsOneLine(t *testing.T) {
	python := python3(t)
	venv := t.TempDir()
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(python, filepath.Join(venv, "bin", "python")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", "")
	t.Setenv("PYTHONNOUSERSITE", "1")
	if exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import debugpy").Run() == nil {
		t.Fatalf("%s has debugpy: the test needs an interpreter without it", python)
	}
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": venv})
	resp, err := newHost("", "").Run(context.Background(), &pulumirpc.RunRequest{
		AttachDebugger: true, Info: &pulumirpc.ProgramInfo{RootDirectory: venv, ProgramDirectory: venv, Options: options},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.GetError(), "--attach-debugger needs debugpy") || strings.Contains(resp.GetError(), "\n") {
		t.Errorf("--attach-debugger without debugpy got %q", resp.GetError())
	}
}

// debugEngine records the StartDebugging request the host sends.
type debugEngine struct {
	pulumirpc.UnimplementedEngineServer
	requests chan *pulumirpc.StartDebuggingRequest
}

func (e *debugEngine) StartDebugging(_ context.Context, req *pulumirpc.StartDebuggingRequest) (*emptypb.Empty, error) {
	e.requests <- req
	return &emptypb.Empty{}, nil
}

// projectVenv is the project's .venv (make setup): the pulumi SDK brings debugpy into it.
func projectVenv(t *testing.T) string {
	t.Helper()
	venv, err := filepath.Abs(filepath.Join("..", "..", ".venv"))
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import debugpy").Run() != nil {
		t.Fatalf("%s has no debugpy (the pulumi SDK depends on it): run `make setup`", venv)
	}
	return venv
}

func TestAttachDebuggerStartsTheProgramUnderDebugpyAndTellsTheEngine(t *testing.T) {
	venv := projectVenv(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	engine := &debugEngine{requests: make(chan *pulumirpc.StartDebuggingRequest, 1)}
	srv := grpc.NewServer()
	pulumirpc.RegisterEngineServer(srv, engine)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	dir := t.TempDir()
	script := filepath.Join(dir, "exec.py")
	if err := os.WriteFile(script, []byte("print('program ran')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHost(lis.Addr().String(), script)
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": venv})
	done := make(chan *pulumirpc.RunResponse, 1)
	go func() {
		resp, _ := h.Run(context.Background(), &pulumirpc.RunRequest{
			AttachDebugger: true, Pwd: dir, Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir, Options: options},
		})
		done <- resp
	}()
	var req *pulumirpc.StartDebuggingRequest
	select {
	case req = <-engine.requests:
	case resp := <-done:
		t.Fatalf("the run ended before the debugger was announced: %v", resp)
	case <-time.After(90 * time.Second):
		t.Fatal("no StartDebugging within 90 s")
	}
	config := req.GetConfig().AsMap()
	connect, _ := config["connect"].(map[string]any)
	port, _ := connect["port"].(float64)
	if config["type"] != "python" || config["request"] != "attach" || connect["host"] != "127.0.0.1" || port == 0 {
		t.Fatalf("debug configuration = %v", config)
	}
	if req.GetMessage() != fmt.Sprintf("on port %d", int(port)) {
		t.Errorf("message = %q", req.GetMessage())
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", int(port)), 5*time.Second)
	if err != nil {
		t.Fatalf("nothing listens on the announced port: %v", err)
	}
	conn.Close()
	select {
	case resp := <-done:
		t.Fatalf("the program did not wait for the debugger: %v", resp)
	case <-time.After(500 * time.Millisecond):
	}
	h.Cancel(context.Background(), nil) // the user gives up: the waiting program is stopped
	select {
	case <-done:
	case <-time.After(stopDelay + 5*time.Second):
		t.Fatal("Cancel did not stop the program waiting for its debugger")
	}
}

// -- RunPlugin ---------------------------------------------------------------------------------

type pluginStream struct {
	grpc.ServerStream
	ctx     context.Context
	stdout  strings.Builder
	stderr  strings.Builder
	code    int32
	hasCode bool
}

func (s *pluginStream) Context() context.Context { return s.ctx }
func (s *pluginStream) Send(r *pulumirpc.RunPluginResponse) error {
	switch o := r.GetOutput().(type) {
	case *pulumirpc.RunPluginResponse_Stdout:
		s.stdout.Write(o.Stdout)
	case *pulumirpc.RunPluginResponse_Stderr:
		s.stderr.Write(o.Stderr)
	case *pulumirpc.RunPluginResponse_Exitcode:
		s.code, s.hasCode = o.Exitcode, true
	}
	return nil
}

func TestRunPluginRunsMainPyInItsVirtualenvWithArgsAndEnv(t *testing.T) {
	python := python3(t)
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(python, filepath.Join(venv, "bin", "python")); err != nil {
		t.Fatal(err)
	}
	main := "import os, sys\nprint('args', sys.argv[1:], os.environ['PLUGIN_ENV'], os.environ['VIRTUAL_ENV'] == sys.argv[1])\n" +
		"print('to stderr', file=sys.stderr)\nsys.exit(3)\n"
	if err := os.WriteFile(filepath.Join(dir, "__main__.py"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": "venv"})
	stream := &pluginStream{ctx: context.Background()}
	err := newHost("", "").RunPlugin(&pulumirpc.RunPluginRequest{
		Pwd: dir, Args: []string{venv, "b"}, Env: []string{"PLUGIN_ENV=yes"}, Kind: "resource",
		Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir, Options: options},
	}, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("args ['%s', 'b'] yes True\n", venv)
	if stream.stdout.String() != want {
		t.Errorf("stdout = %q, want %q", stream.stdout.String(), want)
	}
	if stream.stderr.String() != "to stderr\n" {
		t.Errorf("stderr = %q", stream.stderr.String())
	}
	if !stream.hasCode || stream.code != 3 {
		t.Errorf("exit code = %d (sent: %v), want 3", stream.code, stream.hasCode)
	}
}

func TestRunPluginWithoutMainPyIsOneClearError(t *testing.T) {
	python3(t)
	dir := t.TempDir()
	err := newHost("", "").RunPlugin(&pulumirpc.RunPluginRequest{
		Pwd: dir, Kind: "resource", Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir},
	}, &pluginStream{ctx: context.Background()})
	if err == nil || !strings.Contains(err.Error(), "has no __main__.py") {
		t.Errorf("err = %v", err)
	}
}

func TestPolicyPackWithoutPulumiPolicyNamesWhatToInstall(t *testing.T) {
	python := python3(t)
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(python, filepath.Join(venv, "bin", "python")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", "")
	t.Setenv("PYTHONNOUSERSITE", "1")
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": venv})
	err := newHost("", "").RunPlugin(&pulumirpc.RunPluginRequest{
		Pwd: dir, Kind: "analyzer", Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir, Options: options},
	}, &pluginStream{ctx: context.Background()})
	if err == nil || !strings.Contains(err.Error(), "cannot import pulumi.policy") || !strings.Contains(err.Error(), "install pulumi-policy") {
		t.Errorf("err = %v", err)
	}
}

// -- code generation -----------------------------------------------------------------------------

func TestGenerateProgramWritesPython(t *testing.T) {
	// A program with no resources binds without any schema; the loader is dialled lazily.
	resp, err := newHost("", "").GenerateProgram(context.Background(), &pulumirpc.GenerateProgramRequest{
		LoaderTarget: "127.0.0.1:1",
		Source: map[string]string{"main.pp": "config greeting string {\n  default = \"hi\"\n}\n" +
			"output shout {\n  value = join(\"-\", [greeting, \"there\"])\n}\n"},
		Strict: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDiagnostics()) != 0 {
		t.Fatalf("diagnostics: %v", resp.GetDiagnostics())
	}
	main := string(resp.GetSource()["__main__.py"])
	for _, want := range []string{"import pulumi", `config = pulumi.Config()`, `pulumi.export("shout"`} {
		if !strings.Contains(main, want) {
			t.Errorf("__main__.py lacks %q:\n%s", want, main)
		}
	}
}

func TestGenerateProgramReportsBadPCLAsDiagnostics(t *testing.T) {
	resp, err := newHost("", "").GenerateProgram(context.Background(), &pulumirpc.GenerateProgramRequest{
		LoaderTarget: "127.0.0.1:1",
		Source:       map[string]string{"main.pp": "output shout {\n  value = undefinedThing\n}\n"},
		Strict:       true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetDiagnostics()) == 0 || !strings.Contains(fmt.Sprint(resp.GetDiagnostics()), "undefinedThing") {
		t.Errorf("diagnostics = %v, want one naming undefinedThing", resp.GetDiagnostics())
	}
}

func TestWriteFilesRefusesPathsOutsideTheDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := writeFiles(dir, map[string][]byte{"../escape.py": []byte("x")}); err == nil {
		t.Fatal("a generated ../escape.py was written")
	}
	if err := writeFiles(dir, map[string][]byte{"pkg/__init__.py": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "pkg", "__init__.py")); string(data) != "x" {
		t.Errorf("pkg/__init__.py = %q", data)
	}
}

// -- Link --------------------------------------------------------------------------------------

func TestLinkAddsAGeneratedSDKToRequirements(t *testing.T) {
	root, sdk := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "requirements.txt"), []byte("pulumi>=3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sdk, "pyproject.toml"), []byte("[project]\nname = \"pulumi_ext\"\nversion = \"1.0.0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sdk, "pulumi_ext"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sdk, "pulumi_ext", "pulumi-plugin.json"), []byte(`{"resource": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	info := &pulumirpc.ProgramInfo{RootDirectory: root, ProgramDirectory: root}
	resp, err := newHost("", "").Link(context.Background(), &pulumirpc.LinkRequest{
		Info: info, Packages: []*pulumirpc.LinkRequest_LinkDependency{{Path: sdk, Package: &pulumirpc.PackageDependency{Name: "ext"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := os.ReadFile(filepath.Join(root, "requirements.txt"))
	if !strings.Contains(string(reqs), "pulumi>=3\n") || !strings.Contains(string(reqs), sdk) {
		t.Errorf("requirements.txt = %q, want pulumi>=3 and %s", reqs, sdk)
	}
	if !strings.Contains(resp.GetImportInstructions(), "import pulumi_ext") {
		t.Errorf("instructions = %q", resp.GetImportInstructions())
	}
	// Nothing to link (every `pulumi convert`): nothing written.
	if _, err := newHost("", "").Link(context.Background(), &pulumirpc.LinkRequest{Info: info}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(root, "requirements.txt")); string(again) != string(reqs) {
		t.Errorf("an empty Link changed requirements.txt: %q", again)
	}
}

func TestConfigTooLargeForTheEnvironmentNamesItsLargestKey(t *testing.T) {
	huge := map[string]string{"rocm-bake:buildArgs": strings.Repeat("x", 200_000), "rocm-bake:dist": "dist"}
	if _, _, err := configEnv(huge, nil); err == nil || !strings.Contains(err.Error(), "rocm-bake:buildArgs") ||
		!strings.Contains(err.Error(), "195 KiB") {
		t.Errorf("configEnv error = %v, want one naming rocm-bake:buildArgs and its size", err)
	}
	analyzer := &pulumirpc.AnalyzerStackConfigureRequest{Stack: "s", Config: huge}
	if _, err := policyEnv(analyzer); err == nil || !strings.Contains(err.Error(), "rocm-bake:buildArgs") {
		t.Errorf("policyEnv error = %v, want one naming rocm-bake:buildArgs", err)
	}
	if _, _, err := configEnv(map[string]string{"rocm-bake:dist": "dist"}, nil); err != nil {
		t.Errorf("a small config is refused: %v", err)
	}
}

func TestASyntaxErrorInTheProgramShowsItsOwnLinesNotTheHostsFrames(t *testing.T) {
	python3(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "__main__.py"), []byte("import os\nx = (\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := newHost("", filepath.Join(dir, "no-exec-script")).Run(context.Background(), &pulumirpc.RunRequest{
		Pwd: dir, Info: &pulumirpc.ProgramInfo{RootDirectory: dir, ProgramDirectory: dir}})
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.GetError()
	if !strings.Contains(msg, filepath.Join(dir, "__main__.py")+"\", line 2") || !strings.Contains(msg, "SyntaxError") ||
		strings.Contains(msg, "Traceback") || strings.Count(msg, "\n") > 5 {
		t.Errorf("Run error = %q, want the program's file, line and SyntaxError in a few lines, no host frames", msg)
	}
}

// -- InstallDependencies -------------------------------------------------------------------------

type installStream struct {
	grpc.ServerStream
	out strings.Builder
}

func (s *installStream) Context() context.Context { return context.Background() }
func (s *installStream) Send(r *pulumirpc.InstallDependenciesResponse) error {
	s.out.Write(r.GetStdout())
	return nil
}

// installProject lays out a project whose venv python is a stand-in that logs its arguments and
// fails when they name failOn; it returns the project root and the log.
func installProject(t *testing.T, withLock bool, failOn string) (root, log string) {
	t.Helper()
	root = t.TempDir()
	log = filepath.Join(root, "argv.log")
	bin := filepath.Join(root, ".venv", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\ncase \"$*\" in *%s*) echo 'hash mismatch' >&2; exit 1;; esac\n", log, failOn)
	if err := os.WriteFile(filepath.Join(bin, "python"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{"requirements.txt"}
	if withLock {
		files = append(files, lockFile)
	}
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(root, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, log
}

func runInstall(t *testing.T, root string) (string, error) {
	t.Helper()
	options, _ := structpb.NewStruct(map[string]any{"virtualenv": ".venv"})
	stream := &installStream{}
	err := newHost("", "").InstallDependencies(&pulumirpc.InstallDependenciesRequest{
		Info: &pulumirpc.ProgramInfo{RootDirectory: root, ProgramDirectory: root, Options: options},
	}, stream)
	return stream.out.String(), err
}

func TestInstallWithALockRequiresHashesThenInstallsTheProjectLikeMakeSetup(t *testing.T) {
	root, log := installProject(t, true, "never-matches")
	if out, err := runInstall(t, root); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(log)
	want := "-m pip install --quiet --require-hashes -r requirements.lock\n" +
		"-m pip install --quiet --no-deps --no-build-isolation -e .\n"
	if string(got) != want {
		t.Errorf("pip ran:\n%s\nwant (the Makefile's venv recipe):\n%s", got, want)
	}
}

func TestInstallWithoutALockInstallsRequirementsTxt(t *testing.T) {
	root, log := installProject(t, false, "never-matches")
	if out, err := runInstall(t, root); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(log)
	if want := "-m pip install --quiet -r requirements.txt\n"; string(got) != want {
		t.Errorf("pip ran:\n%s\nwant:\n%s", got, want)
	}
}

func TestInstallStopsAtARefusedLockAndNamesIt(t *testing.T) {
	root, log := installProject(t, true, "requirements.lock")
	out, err := runInstall(t, root)
	if err == nil || !strings.Contains(err.Error(), "--require-hashes -r requirements.lock") {
		t.Errorf("err = %v, want the refused lock step named", err)
	}
	if !strings.Contains(out, "hash mismatch") {
		t.Errorf("pip's own message was not streamed to the engine: %q", out)
	}
	if got, _ := os.ReadFile(log); strings.Contains(string(got), "-e .") {
		t.Errorf("the project was installed after its lock was refused:\n%s", got)
	}
}
