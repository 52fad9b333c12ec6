package herald

import (
	"context"
	"sync"
	"time"

	"github.com/heraldwf/herald/storage"
)

// busFinisher records the ends of attempts in batches: a worker hands its
// result over and waits; a few finisher goroutines each take every result
// waiting (up to busFinishBatch), group them by tenant and write each
// group with one BusFinish call. Under load the results that pile up while
// a call is in flight share the next one — one transaction (on PostgreSQL
// one statement and one WAL flush) for many attempts; when idle a result
// is written at once, alone, with no added wait. It pays on PostgreSQL
// (one WAL flush for many attempts); SQLite's writer already merges
// concurrent calls into one commit. A few finishers, not many: each
// in-flight call splits the waiting results further (heraldbench
// bus-handler chose two).
type busFinisher struct {
	r    *Runtime
	reqs chan *finishReq
	wg   sync.WaitGroup
}

type finishReq struct {
	tenant string
	now    time.Time
	result storage.BusResult
	done   chan error
}

const (
	// busFinishBatch caps the results of one BusFinish call.
	busFinishBatch = 256
	// busFinishers is how many BusFinish calls may be in flight at once.
	busFinishers = 2
)

func newBusFinisher(r *Runtime) *busFinisher {
	f := &busFinisher{r: r, reqs: make(chan *finishReq, busFinishBatch)}
	for range busFinishers {
		f.wg.Add(1)
		go f.loop()
	}
	return f
}

// finish records one attempt's end and returns its outcome (ErrLeaseLost
// when its lock token no longer owns the execution).
func (f *busFinisher) finish(tenant string, now time.Time, res storage.BusResult) error {
	req := &finishReq{tenant: tenant, now: now, result: res, done: make(chan error, 1)}
	f.reqs <- req
	return <-req.done
}

// close stops the finisher once every worker has finished (nothing sends
// after it).
func (f *busFinisher) close() {
	close(f.reqs)
	f.wg.Wait()
}

func (f *busFinisher) loop() {
	defer f.wg.Done()
	for first := range f.reqs {
		batch := []*finishReq{first}
	gather:
		for len(batch) < busFinishBatch {
			select {
			case req, ok := <-f.reqs:
				if !ok {
					break gather
				}
				batch = append(batch, req)
			default:
				break gather
			}
		}
		f.write(batch)
	}
}

// write records a batch, one BusFinish call per tenant.
func (f *busFinisher) write(batch []*finishReq) {
	byTenant := map[string][]*finishReq{}
	var order []string
	for _, req := range batch {
		if _, ok := byTenant[req.tenant]; !ok {
			order = append(order, req.tenant)
		}
		byTenant[req.tenant] = append(byTenant[req.tenant], req)
	}
	for _, tenant := range order {
		reqs := byTenant[tenant]
		p := &storage.BusFinishParams{Tenant: tenant, Results: make([]storage.BusResult, len(reqs))}
		for i, req := range reqs {
			p.Results[i] = req.result
			if req.now.After(p.Now) {
				p.Now = req.now
			}
		}
		errs, err := f.r.store.BusFinish(context.Background(), p)
		for i, req := range reqs {
			switch {
			case err != nil:
				req.done <- err
			case i < len(errs):
				req.done <- errs[i]
			default:
				req.done <- nil
			}
		}
	}
}
