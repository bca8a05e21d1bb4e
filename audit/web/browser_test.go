package web

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds a headless-capable Chromium or Chrome.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotDir is where the browser test leaves its screenshots:
// $WRIT_SCREENSHOTS, else a directory under the system temp dir.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("WRIT_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "writ-web-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBrowser renders the pages in headless Chromium: the fleet page, the
// refusals filter submitted through its form, a grant's chain and the
// effects page, checking what a person would read and saving a
// screenshot of each.
func TestBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("SKIP: no chromium on PATH (apt-get install -y chromium); the web view's httptest tests still ran")
	}
	if testing.Short() {
		t.Skip("SKIP: headless browser test in -short mode")
	}
	ts, _ := server(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// Start the browser before any deadline: a first start is setup.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	dir := screenshotDir(t)
	shot := func(name string) {
		t.Helper()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return v
	}
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}

	do(chromedp.Navigate(ts.URL + "/"))
	head, checks, reviews := text("#head"), text("#checks"), text("#reviews")
	if len(strings.TrimSpace(head)) != 64 || !strings.HasPrefix(checks, "ok") || !strings.Contains(reviews, "vault_read") {
		t.Errorf("fleet: head %q checks %q reviews %q", head, checks, reviews)
	}
	shot("fleet")

	do(chromedp.Navigate(ts.URL+"/refusals"),
		chromedp.SetValue(chromedp.CSS(`select[name="kind"]`), "approval_required"),
		chromedp.SetValue(chromedp.CSS(`input[name="lane"]`), "coordinator"),
		chromedp.Submit(chromedp.CSS(`input[name="lane"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rows`)))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#rows tr.approval_required').length + 100*document.querySelectorAll('#rows tr:not(.approval_required)').length`))
	if err != nil {
		t.Fatal(err)
	}
	if rows != 100+4 { // the header row (x100) and the four held calls
		t.Errorf("filtered refusals: %d (header*100+held)", rows)
	}
	shot("refusals-held")

	do(chromedp.Navigate(ts.URL + "/grant/g7"))
	sentence, closure := text("#sentence"), text("#closure")
	if !strings.HasPrefix(sentence, "Grant g7 (worker w5") || strings.TrimSpace(closure) != "confirmed" {
		t.Errorf("grant chain: sentence %q closure %q", sentence, closure)
	}
	shot("grant-chain")
	do(chromedp.Navigate(ts.URL+"/effects"), chromedp.WaitVisible(chromedp.CSS("#contested")))
	shot("effects")
	do(chromedp.Navigate(ts.URL+"/worker/w1"), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	shot("worker-timeline")

	// A route: from the fleet page's routes to the route's leases, and
	// the late effect of a grant bound to a lapsed generation.
	do(chromedp.Navigate(ts.URL+"/"), chromedp.Click(chromedp.CSS(`#routes a[href^="/route/"]`)), chromedp.WaitVisible(chromedp.CSS("#leases")))
	leases, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#leases tr[class^="lease_"]').length`))
	if err != nil {
		t.Fatal(err)
	}
	if summary := text("#summary"); leases != 3 || !strings.Contains(summary, "generation 3") || !strings.Contains(summary, "revoked") {
		t.Errorf("route page: %d leases, summary %q", leases, summary)
	}
	shot("route")
	do(chromedp.Navigate(ts.URL + "/grant/rt2"))
	if route, closure := text("#route"), text("#closure"); !strings.Contains(route, "generation 2") || !strings.Contains(route, "lapsed") ||
		!strings.HasPrefix(strings.TrimSpace(closure), "contested") || !strings.Contains(closure, "late") {
		t.Errorf("route-bound grant: route %q closure %q", route, closure)
	}
	shot("grant-chain-route-stale")

	// Under the scenario's break-glass case for w5.
	glass, _ := serverAt(t, 0)
	do(chromedp.Navigate(glass.URL + "/grant/g7"))
	if banner := text("#glass"); !strings.Contains(banner, "Break-glass case inc-1") {
		t.Errorf("banner %q", banner)
	}
	shot("grant-chain-break-glass")
	do(chromedp.Navigate(glass.URL+"/breakglass"), chromedp.WaitVisible(chromedp.CSS("#views")))
	shot("break-glass-views")
}
