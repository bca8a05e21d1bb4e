package audit

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/writ-dev/writ/events"
)

// Decoded is one message as a Pipeline hands it to its fold: the result of
// events.DecodeInto on the message's bytes, and the stream sequence it
// was added with.
//
// Event and its slices (Counters, Cancelled, Rules, Sources, Grounds,
// Quotas, Origins, Policy) are valid only during the fold call: the pipeline decodes later
// messages into the same memory. The strings may be kept (see
// events.DecodeInto). When Err is set, Event holds no field. A bare
// replay folds it with fsm.EvolveRef(state, d.Event), which keeps nothing
// but strings and does not copy the event.
type Decoded struct {
	Event     *events.Event
	Err       error
	StreamSeq uint64
}

// pipeBatch is how many messages travel through the pipeline together: a
// batch is decoded by one worker and then folded as a whole, so the
// per-message cost of the hand-offs is small.
const pipeBatch = 256

type batch struct {
	raw    [][]byte
	seqs   []uint64
	shared []bool // decode raw[i] with events.DecodeShared (AddShared)
	evs    []events.Event
	errs   []error
	ready  chan struct{} // a worker sends once the batch is decoded
}

// ErrPipelineClosed is returned by Pipeline.Add after Close.
var ErrPipelineClosed = errors.New("audit: pipeline closed")

// Pipeline decodes and hash-checks receipts on a pool of goroutines and
// folds them, one at a time and in the order they were added, on one more
// goroutine. Decoding and the hash check are independent per message;
// what depends on the messages before (the chain link, the invariants, the
// projection) stays in the sequential fold, so the result is exactly the
// sequential one: the same fold calls in the same order, with the same
// decoded events and errors. After the fold returns an error nothing more
// is folded.
//
// A Pipeline is used from one goroutine: Add the messages in order, then
// Close. The fold runs on the pipeline's own goroutine; whatever it
// mutates (a Verifier, an fsm.State) must not be read until Close has
// returned. Memory is bounded: Add blocks while a few batches per worker
// are in flight.
type Pipeline struct {
	fold    func(*Decoded) error
	cur     *batch
	work    chan *batch // to the decoders
	order   chan *batch // to the folder, in the order added
	free    chan *batch // batches to reuse; bounds what is in flight
	done    chan struct{}
	decoded sync.WaitGroup
	stop    atomic.Bool // the fold failed: skip decoding
	err     error       // the fold's error; read after done or under stop
	errMu   sync.Mutex
	closed  bool
}

// NewPipeline starts a pipeline with the given number of decoding
// goroutines (GOMAXPROCS when workers <= 0) that calls fold for each
// message added, in order, until fold returns an error.
func NewPipeline(workers int, fold func(*Decoded) error) *Pipeline {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	inFlight := 2*workers + 2
	p := &Pipeline{
		fold:  fold,
		work:  make(chan *batch, inFlight),
		order: make(chan *batch, inFlight),
		free:  make(chan *batch, inFlight),
		done:  make(chan struct{}),
	}
	for range inFlight {
		p.free <- &batch{
			raw:    make([][]byte, 0, pipeBatch),
			seqs:   make([]uint64, 0, pipeBatch),
			shared: make([]bool, 0, pipeBatch),
			evs:    make([]events.Event, pipeBatch),
			errs:   make([]error, pipeBatch),
			ready:  make(chan struct{}, 1),
		}
	}
	p.decoded.Add(workers)
	for range workers {
		go p.decode()
	}
	go p.run()
	return p
}

// Pipeline returns a pipeline that checks messages exactly as v.Add does,
// decoding them on workers goroutines (GOMAXPROCS when workers <= 0).
// Until its Close returns, v must not be used. Add and Close return v's
// first violation, as v.Add does.
func (v *Verifier) Pipeline(workers int) *Pipeline {
	return NewPipeline(workers, func(d *Decoded) error {
		return v.addDecoded(d.Event, d.Err, d.StreamSeq, false)
	})
}

// Add queues one message with its stream sequence (0 when there is none).
// The pipeline keeps raw until the message is folded: the caller must not
// modify it before Close. Add returns the fold's error once the fold has
// failed (the message is then dropped), and ErrPipelineClosed after Close.
func (p *Pipeline) Add(raw []byte, streamSeq uint64) error {
	return p.add(raw, streamSeq, false)
}

// AddShared is Add for a message handed over for good, as to
// events.DecodeShared: raw must never be modified afterwards, by anyone,
// since the decoded strings (and whatever the fold keeps of them) view it.
// A message received from NATS qualifies. It saves the copy of the strings
// Add makes for each message.
func (p *Pipeline) AddShared(raw []byte, streamSeq uint64) error {
	return p.add(raw, streamSeq, true)
}

func (p *Pipeline) add(raw []byte, streamSeq uint64, shared bool) error {
	if p.closed {
		return ErrPipelineClosed
	}
	if p.stop.Load() {
		return p.foldErr()
	}
	if p.cur == nil {
		p.cur = <-p.free
	}
	b := p.cur
	b.raw = append(b.raw, raw)
	b.seqs = append(b.seqs, streamSeq)
	b.shared = append(b.shared, shared)
	if len(b.raw) == pipeBatch {
		p.dispatch()
	}
	return nil
}

// Close folds every message added so far, stops the goroutines and
// returns the fold's first error, or nil.
func (p *Pipeline) Close() error {
	if !p.closed {
		p.closed = true
		if p.cur != nil && len(p.cur.raw) > 0 {
			p.dispatch()
		}
		close(p.work)
		close(p.order)
		<-p.done
		p.decoded.Wait()
	}
	return p.foldErr()
}

func (p *Pipeline) foldErr() error {
	p.errMu.Lock()
	defer p.errMu.Unlock()
	return p.err
}

func (p *Pipeline) dispatch() {
	b := p.cur
	p.cur = nil
	// Neither send blocks: both channels hold every batch there is.
	p.order <- b
	p.work <- b
}

func (p *Pipeline) decode() {
	defer p.decoded.Done()
	for b := range p.work {
		if !p.stop.Load() {
			for i, raw := range b.raw {
				if b.shared[i] {
					b.errs[i] = events.DecodeShared(raw, &b.evs[i])
				} else {
					b.errs[i] = events.DecodeInto(raw, &b.evs[i])
				}
			}
		}
		b.ready <- struct{}{}
	}
}

func (p *Pipeline) run() {
	defer close(p.done)
	var d Decoded
	for b := range p.order {
		<-b.ready
		if !p.stop.Load() {
			for i := range b.raw {
				d = Decoded{Event: &b.evs[i], Err: b.errs[i], StreamSeq: b.seqs[i]}
				if err := p.fold(&d); err != nil {
					p.errMu.Lock()
					p.err = err
					p.errMu.Unlock()
					p.stop.Store(true)
					break
				}
			}
		}
		clear(b.raw) // drop the caller's buffers
		clear(b.errs)
		b.raw, b.seqs, b.shared = b.raw[:0], b.seqs[:0], b.shared[:0]
		p.free <- b
	}
}
