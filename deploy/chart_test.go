package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The chart under test and the Kubernetes version its manifests are checked
// against: the API types of k8s.io/api v0.37 (go.mod), Kubernetes 1.37.
const (
	chartDir       = "helm/tah"
	kubeAPIVersion = "1.37"
)

// helmBinary is bin/helm (make helm builds it from the module proxy's
// helm.sh/helm/v4, deploy/go.mod's tool), or HELM, or one built here.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if p, _ := filepath.Abs("../bin/helm"); fileExists(p) {
		return p
	}
	p := filepath.Join(t.TempDir(), "helm")
	cmd := exec.Command(goCmd(), "build", "-o", p, "helm.sh/helm/v4/cmd/helm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build helm: %v\n%s", err, out)
	}
	return p
}

// The value sets the chart is rendered with: the defaults, and every option
// turned on (or off) at once.
var valueSets = map[string][]string{
	"defaults": nil,
	"everything": {
		"--set", "serviceMonitor.enabled=true",
		"--set", "tracing.enabled=true", "--set", "tracing.endpoint=http://otel-collector:4318", "--set", "tracing.captureContent=true",
		"--set", "llm.apiKey.secretName=openai", "--set", "config.llm.provider=openai", "--set", "config.llm.model=gpt-4o-mini",
		"--set", "nats.tlsCASecret=nats-ca", "--set", "nats.url=tls://nats:4222",
		"--set", "readModel.persistence.enabled=false", "--set", "workers.replicas=4",
		"--set", "readModel.persistence.storageClass=fast",
		"--set", "extraEnv[0].name=TAH_LOG_LEVEL", "--set", "extraEnv[0].value=debug",
		"--set", "nodeSelector.pool=agents",
	},
	"no workers": {"--set", "workers.replicas=0", "--set", "podDisruptionBudget.enabled=false", "--set", "topologySpread=false"},
}

// TestChart lints the chart (helm lint --strict) and renders it (helm
// template) with each value set, and checks every rendered object against
// the API of Kubernetes kubeAPIVersion: decoded strictly into the types of
// k8s.io/api (an unknown or misplaced field fails), names valid, what
// refers to something (a port, a volume, a selector) finding it.
func TestChart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	helm := helmBinary(t)
	run(t, ctx, ".", nil, helm, "lint", "--strict", chartDir)
	for name, set := range valueSets {
		t.Run(name, func(t *testing.T) {
			out := run(t, ctx, ".", nil, helm, append([]string{"template", "tah", chartDir, "--namespace", "agents", "--kube-version", kubeAPIVersion}, set...)...)
			objs := decodeAll(t, out)
			checkObjects(t, objs)
		})
	}
}

// object is a rendered object, decoded into its type.
type object struct {
	kind string
	name string
	v    any
}

// decodeAll decodes each document of a rendered chart strictly into the
// type of its apiVersion and kind.
func decodeAll(t *testing.T, rendered string) []object {
	t.Helper()
	var objs []object
	for _, doc := range strings.Split(rendered, "\n---") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		if string(j) == "null" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(j, &meta); err != nil {
			t.Fatal(err)
		}
		var v any
		switch meta.APIVersion + "/" + meta.Kind {
		case "v1/ConfigMap":
			v = new(corev1.ConfigMap)
		case "v1/Service":
			v = new(corev1.Service)
		case "apps/v1/StatefulSet":
			v = new(appsv1.StatefulSet)
		case "policy/v1/PodDisruptionBudget":
			v = new(policyv1.PodDisruptionBudget)
		case "monitoring.coreos.com/v1/ServiceMonitor":
			v = new(monitoringv1.ServiceMonitor)
		default:
			t.Fatalf("the chart renders %s %s, which this test does not check: add its type", meta.APIVersion, meta.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("%s %s is not a valid %s of Kubernetes %s: %v\n%s", meta.Kind, meta.Metadata.Name, meta.Kind, kubeAPIVersion, err, doc)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s %s: more than one object in a document", meta.Kind, meta.Metadata.Name)
		}
		objs = append(objs, object{kind: meta.Kind, name: meta.Metadata.Name, v: v})
	}
	return objs
}

// checkObjects checks what a strict decoding does not: names, and that
// what an object names is there.
func checkObjects(t *testing.T, objs []object) {
	t.Helper()
	configMaps := map[string]bool{}
	services := map[string]*corev1.Service{}
	for _, o := range objs {
		for _, msg := range validation.IsDNS1123Subdomain(o.name) {
			t.Errorf("%s %q: %s", o.kind, o.name, msg)
		}
		switch v := o.v.(type) {
		case *corev1.ConfigMap:
			configMaps[v.Name] = true
			var cfg map[string]any
			if err := json.Unmarshal([]byte(v.Data["config.json"]), &cfg); err != nil {
				t.Errorf("ConfigMap %s: config.json is not JSON: %v", v.Name, err)
			}
		case *corev1.Service:
			services[v.Name] = v
			for _, msg := range validation.IsDNS1035Label(v.Name) {
				t.Errorf("Service %q: %s", v.Name, msg)
			}
		}
	}
	sets := 0
	for _, o := range objs {
		switch v := o.v.(type) {
		case *appsv1.StatefulSet:
			sets++
			checkStatefulSet(t, v, configMaps, services)
		case *monitoringv1.ServiceMonitor:
			if !selectsAService(v.Spec.Selector.MatchLabels, services, v.Spec.Endpoints[0].Port) {
				t.Errorf("ServiceMonitor %s selects no Service with a port %s", v.Name, v.Spec.Endpoints[0].Port)
			}
		case *policyv1.PodDisruptionBudget:
			if v.Spec.MaxUnavailable == nil || v.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1 (one node at a time)", v.Name, v.Spec.MaxUnavailable)
			}
		}
	}
	if sets == 0 {
		t.Error("no StatefulSet rendered")
	}
}

func selectsAService(labels map[string]string, services map[string]*corev1.Service, port string) bool {
	for _, s := range services {
		match := true
		for k, v := range labels {
			if s.Labels[k] != v {
				match = false
			}
		}
		for _, p := range s.Spec.Ports {
			if match && p.Name == port {
				return true
			}
		}
	}
	return false
}

func checkStatefulSet(t *testing.T, s *appsv1.StatefulSet, configMaps map[string]bool, services map[string]*corev1.Service) {
	t.Helper()
	pod := s.Spec.Template
	for k, v := range s.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("StatefulSet %s: its selector %s=%s does not match its pods' labels", s.Name, k, v)
		}
	}
	if _, ok := services[s.Spec.ServiceName]; !ok {
		t.Errorf("StatefulSet %s: no Service %s", s.Name, s.Spec.ServiceName)
	}
	volumes := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = true
		if v.ConfigMap != nil && !configMaps[v.ConfigMap.Name] {
			t.Errorf("StatefulSet %s: volume %s names ConfigMap %s, which is not rendered", s.Name, v.Name, v.ConfigMap.Name)
		}
	}
	for _, c := range s.Spec.VolumeClaimTemplates {
		volumes[c.Name] = true
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("StatefulSet %s: pods not run as the image's non-root user: %+v", s.Name, sc)
	}
	for _, c := range pod.Spec.Containers {
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
			for _, msg := range validation.IsValidPortName(p.Name) {
				t.Errorf("%s: port %q: %s", s.Name, p.Name, msg)
			}
		}
		for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || !ports[p.HTTPGet.Port.String()] {
				t.Errorf("%s: the %s probe is not /healthz on a port of the container: %+v", s.Name, name, p)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: mount %s of no volume %s", s.Name, m.MountPath, m.Name)
			}
		}
	}
}

// TestChartRunsWithTahTrust renders the chart with the defaults, gives its
// containers what their pods would have (the ConfigMap's config.json, the
// Secret that tah-trust --k8s writes, the environment of each StatefulSet),
// and asks tah-node to print the configuration it would run with: the
// configuration is accepted, each group is the kind of node it says, and
// every file the pod mounts from the Secret is one tah-trust writes.
func TestChartRunsWithTahTrust(t *testing.T) {
	t.Parallel()
	builtTools(t) // before the hang bound below: a build on a busy machine may take minutes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	trustDir := filepath.Join(dir, "trust")
	run(t, ctx, dir, nil, binary(t, "tah-trust"), "--dir", trustDir, "--k8s", "--namespace", "agents")

	var secret corev1.Secret
	strictYAML(t, filepath.Join(trustDir, "k8s", "tah-creds.yaml"), &secret)
	var natsValues struct {
		Config struct {
			Merge struct {
				Operator        string            `json:"operator"`
				SystemAccount   string            `json:"system_account"`
				ResolverPreload map[string]string `json:"resolver_preload"`
			} `json:"merge"`
		} `json:"config"`
	}
	strictYAML(t, filepath.Join(trustDir, "k8s", "nats-auth-values.yaml"), &natsValues)
	if m := natsValues.Config.Merge; m.Operator == "" || m.SystemAccount == "" || len(m.ResolverPreload) != 2 || m.ResolverPreload[m.SystemAccount] == "" {
		t.Errorf("nats-auth-values.yaml: want the operator, the system account and two preloaded accounts: %+v", m)
	}

	out := run(t, ctx, ".", nil, helmBinary(t), "template", "tah", chartDir, "--namespace", "agents", "--kube-version", kubeAPIVersion)
	objs := decodeAll(t, out)
	var cm *corev1.ConfigMap
	for _, o := range objs {
		if v, ok := o.v.(*corev1.ConfigMap); ok {
			cm = v
		}
	}
	configFile := filepath.Join(dir, "config.json")
	if err := os.WriteFile(configFile, []byte(cm.Data["config.json"]), 0o644); err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, o := range objs {
		s, ok := o.v.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		groups++
		c := s.Spec.Template.Spec.Containers[0]
		if secret.Name != secretOf(s) {
			t.Errorf("%s mounts the Secret %q; tah-trust writes %q", s.Name, secretOf(s), secret.Name)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "creds" && m.SubPath != "" && secret.Data[m.SubPath] == nil {
				t.Errorf("%s mounts %s from the Secret, which tah-trust does not write", s.Name, m.SubPath)
			}
		}
		printed := printConfig(t, ctx, s, c, configFile, trustDir, filepath.Join(dir, s.Name))
		wantRead := strings.HasSuffix(s.Name, "-read")
		if printed.ReadModel != wantRead || printed.NATS.Replicas != 3 || printed.NATS.URL != "nats://nats:4222" {
			t.Errorf("%s: tah-node would run with read_model=%v, nats %+v", s.Name, printed.ReadModel, printed.NATS)
		}
		if printed.NodeID != s.Name+"-0" {
			t.Errorf("%s: node id %q, want the pod's name", s.Name, printed.NodeID)
		}
	}
	if groups != 2 {
		t.Errorf("%d StatefulSets, want the read-model nodes' and the workers'", groups)
	}
}

func secretOf(s *appsv1.StatefulSet) string {
	for _, v := range s.Spec.Template.Spec.Volumes {
		if v.Name == "creds" && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

func strictYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

type printedConfig struct {
	NodeID    string `json:"node_id"`
	ReadModel bool   `json:"read_model"`
	NATS      struct {
		URL      string `json:"url"`
		Creds    string `json:"creds"`
		Replicas int    `json:"replicas"`
	} `json:"nats"`
}

// printConfig runs tah-node --print-config as the container would run it:
// its arguments and environment, the pod's name for a fieldRef, its mounts'
// paths turned into this machine's.
func printConfig(t *testing.T, ctx context.Context, s *appsv1.StatefulSet, c corev1.Container, configFile, trustDir, dataDir string) printedConfig {
	t.Helper()
	paths := map[string]string{
		"/etc/tah/config/config.json": configFile,
		"/etc/tah/creds/node.creds":   filepath.Join(trustDir, "node.creds"),
		"/var/lib/tah":                dataDir,
	}
	var env []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
			v = s.Name + "-0"
		}
		if p, ok := paths[v]; ok {
			v = p
		}
		env = append(env, e.Name+"="+v)
	}
	var args []string
	for _, a := range c.Args {
		if p, ok := paths[a]; ok {
			a = p
		}
		args = append(args, a)
	}
	out := run(t, ctx, t.TempDir(), env, binary(t, "tah-node"), append(args, "--print-config")...)
	var p printedConfig
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%s: --print-config: %v\n%s", s.Name, err, out)
	}
	if p.NATS.Creds != paths["/etc/tah/creds/node.creds"] {
		t.Errorf("%s: nats.creds %q: not the Secret's node.creds", s.Name, p.NATS.Creds)
	}
	return p
}
