package deploy_test

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestNATSValues checks that the nats chart's values (which no test renders:
// the chart is not reachable here) run the nats-server the end-to-end run
// uses, with the server settings of deploy/compose/nats.conf, which it runs.
func TestNATSValues(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("helm/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool           `json:"enabled"`
				Replicas int            `json:"replicas"`
				Merge    map[string]any `json:"merge"`
			} `json:"cluster"`
			JetStream struct {
				Enabled bool           `json:"enabled"`
				Merge   map[string]any `json:"merge"`
			} `json:"jetstream"`
			Resolver struct {
				Enabled bool           `json:"enabled"`
				Merge   map[string]any `json:"merge"`
			} `json:"resolver"`
			Merge map[string]any `json:"merge"`
		} `json:"config"`
		Container struct {
			Image struct {
				Tag string `json:"tag"`
			} `json:"image"`
		} `json:"container"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimPrefix(natsVersion(t), "v"); !strings.HasPrefix(v.Container.Image.Tag, want+"-") && v.Container.Image.Tag != want {
		t.Errorf("nats-values.yaml runs nats %s: want %s, the nats-server of go.mod that the end-to-end run uses", v.Container.Image.Tag, want)
	}
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.JetStream.Enabled || !c.Resolver.Enabled {
		t.Errorf("want a cluster of 3 with JetStream and a resolver: %+v", c)
	}
	conf, err := os.ReadFile("compose/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	// Each setting as nats.conf writes it, and as the values give it.
	for _, s := range []struct {
		conf string
		got  any
		want any
	}{
		{`sync_interval: always`, c.JetStream.Merge["sync_interval"], "always"},
		{`ping_interval: "2.5s"`, c.Cluster.Merge["ping_interval"], "2.5s"},
		{`ping_max: 2`, c.Cluster.Merge["ping_max"], float64(2)},
		{`type: full`, c.Resolver.Merge["type"], "full"},
		{`max_control_line: 16KB`, c.Merge["max_control_line"], float64(16 * 1024)},
	} {
		if !strings.Contains(string(conf), s.conf) {
			t.Errorf("compose/nats.conf has no %q", s.conf)
		}
		if s.got != s.want {
			t.Errorf("nats-values.yaml gives %v for nats.conf's %q", s.got, s.conf)
		}
	}
}
