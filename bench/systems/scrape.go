package systems

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Timing is one histogram series' sample count and sum of seconds.
type Timing struct {
	Count float64 `json:"count"`
	Sum   float64 `json:"sum_seconds"`
}

// Mean is the mean sample in seconds (0 without samples).
func (t Timing) Mean() float64 {
	if t.Count == 0 {
		return 0
	}
	return t.Sum / t.Count
}

// Add is the samples of t and u together.
func (t Timing) Add(u Timing) Timing { return Timing{Count: t.Count + u.Count, Sum: t.Sum + u.Sum} }

// Sub is the samples taken between an earlier reading and t.
func (t Timing) Sub(earlier Timing) Timing {
	return Timing{Count: t.Count - earlier.Count, Sum: t.Sum - earlier.Sum}
}

// Timings are one node's latency histograms, keyed "raft/STAGE" for
// writ_raft_stage_seconds, "spend" for writ_issuer_spend_seconds and
// "commit/OP" for writ_issuer_commit_seconds.
type Timings map[string]Timing

// Sub is every series' samples taken between an earlier reading and t.
func (t Timings) Sub(earlier Timings) Timings {
	out := make(Timings, len(t))
	for k, v := range t {
		out[k] = v.Sub(earlier[k])
	}
	return out
}

// Scrape reads the latency histograms from node i's /metrics (issuer
// processes only: in-process nodes serve none).
func (w *Writ) Scrape(ctx context.Context, i int) (Timings, error) {
	n := w.Nodes[i]
	if n.MetricsPort == 0 {
		return nil, fmt.Errorf("node %s serves no metrics (in-process nodes share raft's process-wide timers)", n.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", n.MetricsPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", n.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s", n.ID, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", n.ID, err)
	}
	return timingsOf(fams), nil
}

// timingsOf picks the latency histograms out of a scrape.
func timingsOf(fams map[string]*dto.MetricFamily) Timings {
	out := Timings{}
	add := func(fam, label, prefix string) {
		mf := fams[fam]
		if mf == nil {
			return
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			key := prefix
			if label != "" {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label {
						key += "/" + lp.GetValue()
					}
				}
			}
			out[key] = Timing{Count: float64(h.GetSampleCount()), Sum: h.GetSampleSum()}
		}
	}
	add("writ_raft_stage_seconds", "stage", "raft")
	add("writ_issuer_spend_seconds", "", "spend")
	add("writ_issuer_commit_seconds", "op", "commit")
	return out
}
