package plan

import (
	"context"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

var _ HeadStore = (*BoltStore)(nil)

// GetHead implements HeadStore: the header record alone (the plan's
// Index is computed from its records once for a plan written before the
// index existed).
func (s *BoltStore) GetHead(_ context.Context, uuid string) (View, error) {
	if err := ValidUUID(uuid); err != nil {
		return View{}, err
	}
	var v View
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(uuid))
		if b == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, uuid)
		}
		h, err := readIndexedHeader(b, uuid)
		if err != nil {
			return err
		}
		p := h.Plan
		p.Reboots = nil
		p.Version = strconv.FormatUint(h.Version, 10)
		v = View{Plan: p, Index: *h.Index, Pos: []int{}}
		return nil
	})
	return v, err
}

// PutHead implements HeadStore: one transaction, compare-and-swap on the
// plan's version, writing the header record only.
func (s *BoltStore) PutHead(_ context.Context, hv View) error {
	if len(hv.Reboots) != 0 {
		return fmt.Errorf("plan %s: PutHead writes the header only, not %d reboots", hv.UUID, len(hv.Reboots))
	}
	if err := hv.Plan.validate(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(hv.UUID))
		if b == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, hv.UUID)
		}
		h, err := readHeader(b, hv.UUID)
		if err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		if strconv.FormatUint(h.Version, 10) != hv.Version {
			return fmt.Errorf("plan %s: %w", hv.UUID, ErrConflict)
		}
		ix := h.Index
		if ix == nil {
			p, _, _, err := load(b, hv.UUID)
			if err != nil {
				return fmt.Errorf("plan: refusing to overwrite: %w", err)
			}
			i := IndexOf(p)
			ix = &i
		}
		if err := checkResumedTx(tx, b, h, (View{Plan: hv.Plan, Index: *ix}).Unfinished()); err != nil {
			return err
		}
		return putHeader(b, hv.Plan, *ix, h.Version+1)
	})
}

// forgetEnded evicts the store's caches of v's plan (its member map, the
// records decoded last) once the plan ended (finished, nothing in
// flight): it never acts again.
func (s *BoltStore) forgetEnded(v View) {
	if v.Unfinished() {
		return
	}
	s.mu.Lock()
	delete(s.members, v.UUID)
	delete(s.decoded, v.UUID)
	s.mu.Unlock()
}
