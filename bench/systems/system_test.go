package systems

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/internal/telemetry"
)

func TestPayloadIsValidJSONOfTheAskedSize(t *testing.T) {
	for _, size := range []int{64, 256, 1024} {
		for _, i := range []int{0, 7, 123456} {
			p := Payload("c64", i, size)
			if len(p) != size {
				t.Fatalf("Payload(%d, %d) is %d bytes", i, size, len(p))
			}
			var v map[string]string
			if err := json.Unmarshal(p, &v); err != nil || v["command"] == "" {
				t.Fatalf("Payload(%d, %d) = %s: %v", i, size, p, err)
			}
		}
	}
	if string(Payload("a", 1, 256)) == string(Payload("a", 2, 256)) {
		t.Fatal("payloads of different tickets are equal")
	}
}

// TestTimingsOfIssuerMetrics: the series names and labels Scrape reads
// are the ones an issuer node exports: a scrape of the issuer's own
// registry yields each stage, the spend histogram and the commit
// histogram by operation, with their counts and sums, and Sub leaves what
// came in between two readings.
func TestTimingsOfIssuerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	stages := telemetry.NewRaftStages(reg, "n1")
	is := telemetry.NewIssuer(reg, "n1", telemetry.IssuerGauges{})
	read := func() Timings {
		t.Helper()
		rec := httptest.NewRecorder()
		telemetry.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		return timingsOf(fams)
	}
	stages.AddSample([]string{"raft", "commitTime"}, 1500) // microseconds
	before := read()
	stages.AddSample([]string{"raft", "commitTime"}, 500)
	stages.AddSampleWithLabels([]string{"raft", "rpc", "appendEntries", "storeLogs"}, 250, nil)
	is.Spend(3 * time.Millisecond)
	is.Request(api.OpSpend, "permit", "", "", "", 2*time.Millisecond)
	d := read().Sub(before)
	for key, want := range map[string]Timing{
		"raft/commit":          {Count: 1, Sum: 0.0005},
		"raft/follower_append": {Count: 1, Sum: 0.00025},
		"spend":                {Count: 1, Sum: 0.003},
		"commit/spend":         {Count: 1, Sum: 0.002},
		"raft/leader_append":   {},
	} {
		got, ok := d[key]
		if !ok || got.Count != want.Count || math.Abs(got.Sum-want.Sum) > 1e-9 {
			t.Errorf("%s: got %+v (present %v), want %+v", key, got, ok, want)
		}
	}
	if m := d["raft/commit"].Mean(); math.Abs(m-0.0005) > 1e-9 {
		t.Errorf("commit mean %v, want 0.0005", m)
	}
}
