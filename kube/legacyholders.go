package kube

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/rebootkit/rebootkit/remediation"
)

// legacyOtherPrefix names, in remediation.Admissions.Others, an
// admission still kept in ExternalAdmissionsName (apart from the shared
// record's names, which it may equal).
const legacyOtherPrefix = ExternalAdmissionsName + "/"

// withLegacy adds to a.Others, when s is the shared record (Name ""),
// the admissions an earlier version kept in ExternalAdmissionsName that
// are not yet moved into its external section (migrateAdmissions), each
// with the host its recorded request names: until the external
// controller's restore loop moves them (its first tick, or never in a
// binary without that controller), both controllers' storm guard counts
// them and the lock per host (hostAdmissions) holds their hosts. cm is
// the shared record as read (nil if missing), read first: a move after it
// changes its version, so a write at that version fails its
// compare-and-swap. An entry is moved when the external section admits
// its name, or when the record's marker (migratedKey) names it with its
// request's value. Read only; a missing ConfigMap holds none; one that
// cannot be read or parsed fails the read (no admission without it).
func (s *Admissions) withLegacy(ctx context.Context, a *remediation.Admissions, cm *corev1.ConfigMap) error {
	if s.Name != "" {
		return nil
	}
	legacy := &Admissions{Client: s.Client, Namespace: s.Namespace, Name: ExternalAdmissionsName}
	old, _, err := legacy.read(ctx)
	if err != nil {
		return err
	}
	if len(old.Machines) == 0 {
		return nil
	}
	var data map[string]string
	if cm != nil {
		data = cm.Data
	}
	moved := map[string]string{}
	if raw := data[migratedKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &moved); err != nil {
			return fmt.Errorf("kube: admissions %s/%s: %s: %w", s.Namespace, s.name(), migratedKey, err)
		}
	}
	ext, _, err := s.readSection(data, SectionExternal)
	if err != nil {
		return err
	}
	admitted := map[string]bool{}
	for _, m := range ext {
		admitted[m] = true
	}
	for _, m := range old.Machines {
		if v, ok := moved[m]; admitted[m] || ok && v == old.Requests[m].Value {
			continue
		}
		if a.Others == nil {
			a.Others = map[string]string{}
		}
		a.Others[legacyOtherPrefix+m] = old.Requests[m].Host
	}
	return nil
}
