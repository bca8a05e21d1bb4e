// Command replaycmp measures the auditor's sequential replay over the
// bench's generated receipt stream (gen.Stream, as writbench's auditor
// phase): events.Decode + fsm.Evolve, events.DecodeInto into one reused
// event + fsm.EvolveRef, and events.DecodeShared (no copy of the strings)
// + fsm.EvolveRef, alternating in one process, every round
// into a fresh state whose digest must equal the issuer's. It prints the
// best and the median of the rounds, in events/s and process CPU per
// event. -only proj applies the first -projn receipts to a fresh
// projection.DB instead (the auditor's catch-up).
//
//	cd bench && go run ./cmd/replaycmp -r 5
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/writ-dev/writ/bench/gen"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

func main() {
	n := flag.Int("n", 1000000, "events")
	rounds := flag.Int("r", 5, "rounds")
	only := flag.String("only", "", "variant")
	projN := flag.Int("projn", 200000, "receipts for the proj variant")
	prof := flag.String("prof", "", "write a CPU profile of the first round here (with -only)")
	freeOS := flag.Bool("free-os", false, "return the heap's free memory to the OS before each round (a fresh process's heap, as writbench's auditor phase measures)")
	scattered := flag.Bool("scattered", false, "hold each receipt in its own allocation, as fsm's outbox hands them out (default: one buffer, gen.Contiguous)")
	flag.Parse()
	raw, st, _ := gen.Stream(*n, 64, time.Second)
	if !*scattered {
		raw = gen.Contiguous(raw)
	}
	want := st.Digest()
	wantDigest = want
	if *only == "proj" {
		raw = raw[:min(*projN, len(raw))]
		ref := fsm.New()
		for _, b := range raw {
			e, err := events.Decode(b)
			if err != nil {
				panic(err)
			}
			if err := fsm.Evolve(ref, e); err != nil {
				panic(err)
			}
		}
		wantDigest = ref.Digest()
		want = fsm.New().Digest()
	}
	st = nil
	runtime.GC()
	variants := map[string]func(s *fsm.State) error{
		"decode+evolve": func(s *fsm.State) error {
			for _, b := range raw {
				e, err := events.Decode(b)
				if err != nil {
					return err
				}
				if err := fsm.Evolve(s, e); err != nil {
					return err
				}
			}
			return nil
		},
		"into+ref": func(s *fsm.State) error {
			var e events.Event
			for _, b := range raw {
				if err := events.DecodeInto(b, &e); err != nil {
					return err
				}
				if err := fsm.EvolveRef(s, &e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	variants["shared+ref"] = func(s *fsm.State) error {
		var e events.Event
		for _, b := range raw {
			if err := events.DecodeShared(b, &e); err != nil {
				return err
			}
			if err := fsm.EvolveRef(s, &e); err != nil {
				return err
			}
		}
		return nil
	}
	variants["proj"] = projVariant(raw)
	names := []string{"decode+evolve", "into+ref", "shared+ref"}
	if *only != "" {
		names = []string{*only}
	}
	res := map[string][][2]float64{}
	allocB := map[string]float64{} // heap bytes allocated per event, last round
	gcs := map[string]uint32{}     // collections during the last round
	for r := 0; r < *rounds; r++ {
		for _, name := range names {
			runtime.GC()
			if *freeOS {
				debug.FreeOSMemory()
			}
			s := fsm.New()
			if *prof != "" && r == 0 {
				f, _ := os.Create(*prof)
				pprof.StartCPUProfile(f)
			}
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			c0 := gen.CPU(os.Getpid())
			t := time.Now()
			if err := variants[name](s); err != nil {
				panic(err)
			}
			d := time.Since(t)
			cpu := float64(gen.CPU(os.Getpid())-c0) / float64(len(raw))
			if *prof != "" && r == 0 {
				pprof.StopCPUProfile()
			}
			runtime.ReadMemStats(&ms1)
			allocB[name] = float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(len(raw))
			gcs[name] = ms1.NumGC - ms0.NumGC
			if s.Digest() != want {
				panic(name + ": digest differs")
			}
			res[name] = append(res[name], [2]float64{float64(len(raw)) / d.Seconds(), cpu})
		}
	}
	for _, name := range names {
		rs := res[name]
		var rates, cpus []float64
		for _, x := range rs {
			rates = append(rates, x[0])
			cpus = append(cpus, x[1])
		}
		sort.Float64s(rates)
		sort.Float64s(cpus)
		fmt.Printf("%-16s events/s best %8.0f median %8.0f | CPU ns/event best %5.0f median %5.0f | %4.0f B allocated/event, %d GCs (n=%d, %d rounds, digest ok)\n",
			name, rates[len(rates)-1], rates[len(rates)/2], cpus[0], cpus[len(cpus)/2], allocB[name], gcs[name], len(raw), len(rs))
	}
}
