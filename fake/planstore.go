package fake

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/rebootkit/rebootkit/plan"
)

var _ plan.Store = (*PlanStore)(nil)

// PlanStore is an in-memory plan.Store that keeps encoded documents, so
// that every Get decodes what Put encoded, with a version per plan for
// compare-and-swap. Not for production.
//
// Other gives a second handle on the same plans, as another process
// (rebootctl beside the executor, a second executor) has it: it has its
// own FailPuts and interloper, and shares the documents, the versions and
// the lock every check and write takes, as processes share a database
// whose transactions are atomic.
type PlanStore struct {
	d        *planDocs
	failPuts int // guarded by d.mu
	between  interloper
}

// planDocs are the plans every handle of one PlanStore shares.
type planDocs struct {
	mu       sync.Mutex
	docs     map[string][]byte
	versions map[string]int
}

// FailPuts makes the next n Puts fail (a crash before the write). Safe
// while in use.
func (s *PlanStore) FailPuts(n int) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.failPuts += n
}

// SetInterloper installs a second writer, called with the plan's UUID
// without the store's lock just before every Put is applied (an operator's
// run, stop or cancel between the executor's read and write). nil removes
// it. Safe while in use.
func (s *PlanStore) SetInterloper(f func(uuid string)) { s.between.set(f) }

// NewPlanStore returns an empty store.
func NewPlanStore() *PlanStore {
	return &PlanStore{d: &planDocs{docs: map[string][]byte{}, versions: map[string]int{}}}
}

// Other returns a second handle on the store's plans, as another process
// has it (see PlanStore): writes through either are checked and applied
// under one lock, and each reads what the other wrote.
func (s *PlanStore) Other() *PlanStore { return &PlanStore{d: s.d} }

// Get implements plan.Store.
func (s *PlanStore) Get(_ context.Context, uuid string) (plan.Plan, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.getLocked(uuid)
}

// getLocked is Get with s.mu held.
func (s *PlanStore) getLocked(uuid string) (plan.Plan, error) {
	d, ok := s.d.docs[uuid]
	if !ok {
		return plan.Plan{}, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	p, err := plan.Decode(d)
	if err != nil {
		return plan.Plan{}, fmt.Errorf("%w: %v", plan.ErrCorrupt, err)
	}
	if p.UUID != uuid {
		return plan.Plan{}, fmt.Errorf("%w: key %s holds plan %s", plan.ErrCorrupt, uuid, p.UUID)
	}
	p.Version = strconv.Itoa(s.d.versions[uuid])
	return p, nil
}

// Create implements plan.Store.
func (s *PlanStore) Create(_ context.Context, p plan.Plan) error {
	if err := plan.ValidUUID(p.UUID); err != nil {
		return err
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if _, ok := s.d.docs[p.UUID]; ok {
		return fmt.Errorf("%w: %s", plan.ErrExists, p.UUID)
	}
	// The others read under the lock as the write: two Creates at once
	// over one server cannot both pass (plantest's race checks).
	others, err := s.listLocked()
	if err != nil {
		return err
	}
	if err := plan.CheckOthers(p, others); err != nil {
		return err
	}
	d, err := plan.Encode(p)
	if err != nil {
		return err
	}
	s.d.docs[p.UUID] = d
	s.d.versions[p.UUID]++
	return nil
}

// Put implements plan.Store with compare-and-swap on p.Version, and
// refuses what plan.CheckPut refuses (as every store does).
func (s *PlanStore) Put(_ context.Context, p plan.Plan) error {
	s.between.run(p.UUID)
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if s.failPuts > 0 {
		s.failPuts--
		return errors.New("fake: injected store failure")
	}
	if _, ok := s.d.docs[p.UUID]; !ok {
		return fmt.Errorf("%w: %s", plan.ErrNotFound, p.UUID)
	}
	if p.Version != strconv.Itoa(s.d.versions[p.UUID]) {
		return fmt.Errorf("fake: plan %s version %s, current %d: %w", p.UUID, p.Version, s.d.versions[p.UUID], plan.ErrConflict)
	}
	cur, err := s.getLocked(p.UUID)
	if err != nil {
		return fmt.Errorf("fake: refusing to overwrite: %w", err)
	}
	// The servers unchanged, DryRun not set on a running real plan, and a
	// plan that starts holding servers checked against the others, under
	// the lock as the write.
	if err := plan.CheckPut(cur, p, s.listLocked); err != nil {
		return err
	}
	d, err := plan.Encode(p)
	if err != nil {
		return err
	}
	s.d.docs[p.UUID] = d
	s.d.versions[p.UUID]++
	return nil
}

// listLocked returns every plan; s.mu is held.
func (s *PlanStore) listLocked() ([]plan.Plan, error) {
	out := make([]plan.Plan, 0, len(s.d.docs))
	for id := range s.d.docs {
		o, err := s.getLocked(id)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// List implements plan.Store.
func (s *PlanStore) List(ctx context.Context) ([]plan.Plan, error) {
	s.d.mu.Lock()
	ids := make([]string, 0, len(s.d.docs))
	for id := range s.d.docs {
		ids = append(ids, id)
	}
	s.d.mu.Unlock()
	var out []plan.Plan
	for _, id := range ids {
		p, err := s.Get(ctx, id)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}
