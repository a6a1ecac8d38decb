// Package deploy checks the deployment files strictly, without a cluster or
// a Docker engine: the Kubernetes manifests decode into the API types with
// unknown fields rejected, the compose file loads with compose-go, and the
// settings that must agree (probes, ports, shutdown timing) do.
package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/contextd/contextd/internal/app"
)

func root(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// strict decodes YAML into v, rejecting unknown fields.
func strict(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

func TestKubernetesManifests(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "k8s")
	var k kustomization
	strict(t, filepath.Join(dir, "kustomization.yaml"), &k)
	if k.Kind != "Kustomization" || k.APIVersion != "kustomize.config.k8s.io/v1beta1" {
		t.Errorf("kustomization: %s %s", k.APIVersion, k.Kind)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			t.Errorf("%s is not listed in kustomization.yaml", name)
		}
	}
	objects := map[string]any{
		"configmap.yaml":   &corev1.ConfigMap{},
		"secret.yaml":      &corev1.Secret{},
		"deployment.yaml":  &appsv1.Deployment{},
		"service.yaml":     &corev1.Service{},
		"pdb.yaml":         &policyv1.PodDisruptionBudget{},
		"hpa.yaml":         &autoscalingv2.HorizontalPodAutoscaler{},
		"migrate-job.yaml": &batchv1.Job{},
	}
	for _, r := range k.Resources {
		obj, ok := objects[r]
		if !ok {
			t.Fatalf("no type known for %s", r)
		}
		strict(t, filepath.Join(dir, r), obj)
	}
	cm := objects["configmap.yaml"].(*corev1.ConfigMap)
	dep := objects["deployment.yaml"].(*appsv1.Deployment)
	svc := objects["service.yaml"].(*corev1.Service)
	hpa := objects["hpa.yaml"].(*autoscalingv2.HorizontalPodAutoscaler)
	pdb := objects["pdb.yaml"].(*policyv1.PodDisruptionBudget)
	job := objects["migrate-job.yaml"].(*batchv1.Job)

	// The base as shipped cannot serve without authentication: its keys
	// file holds no key, so the server refuses to start.
	env := map[string]string{}
	for k, v := range cm.Data {
		env[k] = v
	}
	sec := objects["secret.yaml"].(*corev1.Secret)
	for k, v := range sec.StringData {
		if strings.HasPrefix(k, "CONTEXTD_") {
			env[k] = v
		}
	}
	if env["CONTEXTD_AUTH"] == "off" || env["CONTEXTD_API_KEYS_FILE"] == "" {
		t.Errorf("the base must authenticate: CONTEXTD_AUTH %q, keys file %q", env["CONTEXTD_AUTH"], env["CONTEXTD_API_KEYS_FILE"])
	}
	keys := filepath.Join(t.TempDir(), "keys.jsonl")
	if err := os.WriteFile(keys, []byte(sec.StringData["keys.jsonl"]), 0o600); err != nil {
		t.Fatal(err)
	}
	env["CONTEXTD_API_KEYS_FILE"] = keys
	cfg, err := app.ParseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("config of the base: %v", err)
	}
	if _, err := app.LoadAuth(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "no usable API key") {
		t.Errorf("the base with its placeholder Secret must refuse to start, got %v", err)
	}

	if dep.Kind != "Deployment" || dep.APIVersion != "apps/v1" || hpa.APIVersion != "autoscaling/v2" {
		t.Errorf("kinds: %s %s, %s", dep.APIVersion, dep.Kind, hpa.APIVersion)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != 50051 {
			t.Errorf("%s probe must be a native gRPC probe on 50051: %+v", name, p)
		}
	}
	if !strings.HasSuffix(cm.Data["CONTEXTD_LISTEN_ADDR"], ":50051") || cm.Data["CONTEXTD_AUTH_EXEMPT_HEALTH"] != "true" {
		t.Errorf("the probes need the gRPC port and open health: %v", cm.Data)
	}
	// Termination lines up with graceful stop.
	shutdown, err := time.ParseDuration(cm.Data["CONTEXTD_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatal(err)
	}
	preStop := time.Duration(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if preStop == 0 || grace < preStop+shutdown+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v must cover preStop %v + shutdown %v + margin", grace, preStop, shutdown)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pods must run as non-root")
	}
	// Long-lived HTTP/2: headless Service or MaxConnectionAge (both here).
	if svc.Spec.ClusterIP != corev1.ClusterIPNone && cm.Data["CONTEXTD_MAX_CONNECTION_AGE"] == "" {
		t.Error("gRPC connections need a headless Service or CONTEXTD_MAX_CONNECTION_AGE")
	}
	sel := dep.Spec.Selector.MatchLabels
	for what, labels := range map[string]map[string]string{"service": svc.Spec.Selector, "pdb": pdb.Spec.Selector.MatchLabels} {
		for k, v := range labels {
			if sel[k] != v || dep.Spec.Template.Labels[k] != v {
				t.Errorf("%s selector %v does not match the pods", what, labels)
			}
		}
	}
	if hpa.Spec.ScaleTargetRef.Name != dep.Name || *hpa.Spec.MinReplicas < 2 {
		t.Errorf("hpa: %+v", hpa.Spec)
	}
	if args := job.Spec.Template.Spec.Containers[0].Args; len(args) != 1 || args[0] != "migrate" {
		t.Errorf("the migration job must run `contextd migrate`: %v", args)
	}
}

func TestComposeFile(t *testing.T) {
	dir := root(t)
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "docker-compose.yml")},
		cli.WithWorkingDirectory(dir), cli.WithName("contextd"), cli.WithResolvedPaths(false), cli.WithConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	pg, err := p.GetService("postgres")
	if err != nil || pg.HealthCheck == nil || len(pg.HealthCheck.Test) == 0 {
		t.Fatalf("postgres needs a healthcheck: %+v, %v", pg.HealthCheck, err)
	}
	mig, err := p.GetService("migrate")
	if err != nil || mig.DependsOn["postgres"].Condition != "service_healthy" || len(mig.Command) != 1 || mig.Command[0] != "migrate" {
		t.Errorf("migrate: %+v, %v", mig, err)
	}
	svc, err := p.GetService("contextd")
	if err != nil || svc.DependsOn["migrate"].Condition != "service_completed_successfully" {
		t.Errorf("contextd must wait for the migration: %+v, %v", svc.DependsOn, err)
	}
	if url := svc.Environment["CONTEXTD_DATABASE_URL"]; url == nil || !strings.Contains(*url, "@postgres:5432/") {
		t.Errorf("contextd database URL: %v", url)
	}
}

func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	for _, want := range []string{"AS build", "CGO_ENABLED=0", "distroless/static", "USER 65532", "ENTRYPOINT [\"/usr/local/bin/contextd\"]"} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if strings.Count(text, "FROM ") != 2 {
		t.Error("the Dockerfile should have exactly two stages")
	}
}

// TestBinaryNamesAgree: the server binary is `contextd`, built from
// cmd/server, in the Makefile, the Dockerfile and the docs alike, and its
// one subcommand is `migrate` everywhere.
func TestBinaryNamesAgree(t *testing.T) {
	read := func(name string) string {
		raw, err := os.ReadFile(filepath.Join(root(t), name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for file, wants := range map[string][]string{
		// Release builds are stripped (-s -w): docs/operations.md states their size.
		"Makefile":           {`-ldflags="-s -w" -o bin/contextd ./cmd/server`, `-ldflags="-s -w" -o bin/contextctl ./cmd/contextctl`},
		"Dockerfile":         {`-ldflags="-s -w" -o /out/contextd ./cmd/server`, `-ldflags="-s -w" -o /out/contextctl ./cmd/contextctl`},
		"README.md":          {"make build", "./bin/contextd migrate", "`contextd migrate`"},
		"docs/operations.md": {"make build", "./bin/contextd migrate", "`contextd migrate`"},
	} {
		text := read(file)
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q", file, want)
			}
		}
	}
	if main := read("cmd/server/main.go"); !strings.Contains(main, `args[0] == "migrate"`) {
		t.Error("cmd/server no longer has the migrate subcommand the deployment files run")
	}
}
