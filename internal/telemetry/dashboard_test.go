package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// recorder is a Registerer that keeps the names of what is registered.
type recorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}
func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}
func (r *recorder) Unregister(prometheus.Collector) bool { return true }

// TestDashboardUsesOnlyOurSeries: every series the shipped Grafana
// dashboard queries is one the issuer or the auditor exports.
func TestDashboardUsesOnlyOurSeries(t *testing.T) {
	rec := &recorder{names: map[string]bool{}}
	NewIssuer(rec, "n1", IssuerGauges{RaftState: func() string { return "" }, Outbox: func() float64 { return 0 }, StreamLag: func() float64 { return 0 }})
	NewRaftStages(rec, "n1")
	NewAuditor(rec)
	data, err := os.ReadFile("../../deploy/grafana/writ-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	series := regexp.MustCompile(`writ_[a-z_]+`)
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range series.FindAllString(tg.Expr, -1) {
				base := name
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if b, ok := strings.CutSuffix(name, suf); ok && rec.names[b] {
						base = b
					}
				}
				if !rec.names[base] {
					t.Errorf("panel %q queries %s, which writ does not export", p.Title, name)
				}
				used++
			}
		}
	}
	if used < 10 {
		t.Fatalf("the dashboard queries only %d series", used)
	}
}
