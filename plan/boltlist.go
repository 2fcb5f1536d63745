package plan

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// ListHeads lists every plan as its header alone (a View with no reboots,
// as GetHead gives it), in UUID order: what an executor's pass needs to
// choose the plans to run and to count them by state, at O(1) per plan,
// where List reads every reboot of every plan ever stored. Plans whose
// header cannot be read are left out and named in the error (ErrCorrupt).
func (s *BoltStore) ListHeads(_ context.Context) ([]View, error) {
	var out []View
	var bad []string
	err := s.db.View(func(tx *bolt.Tx) error {
		plans := tx.Bucket(bucketPlans)
		return plans.ForEachBucket(func(k []byte) error {
			uuid := string(k)
			h, err := readIndexedHeader(plans.Bucket(k), uuid)
			if err != nil {
				bad = append(bad, err.Error())
				return nil
			}
			p := h.Plan
			p.Reboots = nil
			p.Version = strconv.FormatUint(h.Version, 10)
			out = append(out, View{Plan: p, Index: *h.Index, Pos: []int{}})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %v", ErrCorrupt, bad)
	}
	return out, nil
}
