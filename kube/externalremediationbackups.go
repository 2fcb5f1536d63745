package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// nodeBackupsKey is the key of the external admissions ConfigMap
// (ExternalAdmissionsName) that keeps, by Node name, what a remediation
// that went (its checker deleted it) still had to restore on its Node: the
// Node was gone, so the backup could not be restored before the finalizer
// came off, and it must outlive the remediation.
const nodeBackupsKey = "nodeBackups"

// pendingRestore is what is restored on a Node when it registers again.
type pendingRestore struct {
	Backup *remediation.NodeBackup `json:"backup,omitempty"`
	// Tainted: remove the out-of-service taint rebootkit put on it.
	Tainted bool `json:"tainted,omitempty"`
}

// nodeBackups keeps pendingRestores in the ConfigMap, compare-and-swap
// on its resourceVersion.
type nodeBackups struct {
	Client    client.Client
	Namespace string
}

func (b *nodeBackups) read(ctx context.Context) (map[string]pendingRestore, *corev1.ConfigMap, error) {
	var cm corev1.ConfigMap
	err := b.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: ExternalAdmissionsName}, &cm)
	if apierrors.IsNotFound(err) {
		return map[string]pendingRestore{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kube: node backups: %w", err)
	}
	m := map[string]pendingRestore{}
	if raw := cm.Data[nodeBackupsKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, nil, fmt.Errorf("kube: node backups %s/%s: %w", b.Namespace, ExternalAdmissionsName, err)
		}
	}
	return m, &cm, nil
}

func (b *nodeBackups) write(ctx context.Context, cm *corev1.ConfigMap, m map[string]pendingRestore) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if cm == nil {
		err = b.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: ExternalAdmissionsName},
			Data: map[string]string{nodeBackupsKey: string(raw)}})
	} else {
		err = b.Client.Patch(ctx, cm, casPatch(cm.ResourceVersion, map[string]any{"data": map[string]any{nodeBackupsKey: string(raw)}}))
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube: node backups: %w", remediation.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("kube: node backups: %w", err)
	}
	return nil
}

// keep adds p for node; what is already kept for it wins key by key (it
// is the older, fuller backup).
func (b *nodeBackups) keep(ctx context.Context, node string, p pendingRestore) error {
	m, cm, err := b.read(ctx)
	if err != nil {
		return err
	}
	if old, ok := m[node]; ok {
		p.Tainted = p.Tainted || old.Tainted
		if old.Backup != nil {
			if p.Backup == nil {
				p.Backup = old.Backup
			} else {
				merged := &remediation.NodeBackup{Name: node, Labels: maps.Clone(p.Backup.Labels), Annotations: maps.Clone(p.Backup.Annotations)}
				merged.Labels = mergeInto(merged.Labels, old.Backup.Labels)
				merged.Annotations = mergeInto(merged.Annotations, old.Backup.Annotations)
				p.Backup = merged
			}
		}
	}
	m[node] = p
	return b.write(ctx, cm, m)
}

func mergeInto(dst, src map[string]string) map[string]string {
	if dst == nil && len(src) > 0 {
		dst = map[string]string{}
	}
	maps.Copy(dst, src)
	return dst
}

// restore restores every kept backup whose Node exists (the labels and
// annotations it lacks, and removes our taint), then forgets it. It
// returns how many still wait for their Node.
func (b *nodeBackups) restore(ctx context.Context, nodes remediation.NodeStore) (int, error) {
	m, cm, err := b.read(ctx)
	if err != nil || len(m) == 0 {
		return 0, err
	}
	done := 0
	for name, p := range m {
		n, err := nodes.Get(ctx, name)
		if err != nil {
			return len(m), err
		}
		if !n.Exists {
			continue
		}
		labels, annotations := p.Backup.Lacking(n)
		if labels != nil || annotations != nil {
			if err := nodes.AddMetadata(ctx, name, labels, annotations); err != nil {
				return len(m), err
			}
		}
		if p.Tainted && n.OutOfService {
			if err := nodes.SetOutOfService(ctx, name, false); err != nil {
				return len(m), err
			}
		}
		delete(m, name)
		done++
	}
	if done > 0 {
		if err := b.write(ctx, cm, m); err != nil {
			return len(m), err
		}
	}
	return len(m), nil
}

// restoreLoop restores kept backups, and moves the admissions of an
// earlier version (migrateAdmissions), every interval until ctx is done
// (a manager Runnable: under leader election, and again after a
// restart); each name moved is handed to enqueue at once.
func (c *ExternalRemediationController) restoreLoop(ctx context.Context, enqueue func(name string)) error {
	b := &nodeBackups{Client: c.Client, Namespace: c.Namespace}
	t := time.NewTicker(c.poll())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// Under the lease, as every other write of the controller: a
		// process that lost it restores nothing.
		pass, cancel := context.WithTimeout(ctx, 30*time.Second)
		var added []string
		_ = reboot.Fenced(pass, c.Guard, "external remediation: restore node backups", func(ctx context.Context) error {
			_, err := b.restore(ctx, c.nodes())
			var merr error
			added, merr = c.migrate(ctx)
			return errors.Join(err, merr)
		})
		cancel()
		for _, n := range added {
			enqueue(n)
		}
	}
}

// migratedKey is the key of the shared admission ConfigMap under which
// migrateAdmissions marks the admissions it moved from
// ExternalAdmissionsName (JSON: name -> the value of its recorded
// request, "" if none), in the same compare-and-swap that adds them.
const migratedKey = "external-migrated"

// migrateAdmissions moves the admissions an earlier version kept in
// ExternalAdmissionsName (its keys "machines", "requests" and "members":
// each admission's recorded request and remediation.Member, whose
// PrevHost and Wrote a gone remediation's release needs) into the
// section SectionExternal of the record both remediation controllers
// share, so that an upgrade keeps counting, and locking, the hosts they
// hold. One step, idempotent: the entries not yet marked as moved
// (migratedKey) are added there (a union) and marked, in one
// compare-and-swap; then they are removed from the old ConfigMap
// (compare-and-swap on the version read; a conflict, such as a Node
// backup kept there in between, reads both again). An entry marked as
// moved is never added again, so a failure or a crash between the two
// writes cannot admit again a remediation that was released in between.
// The marker is removed once the old ConfigMap holds no admissions. The
// restore loop runs it under the lease.
func (c *ExternalRemediationController) migrateAdmissions(ctx context.Context) error {
	_, err := c.migrate(ctx)
	return err
}

// migrate is migrateAdmissions, returning the names it added to the
// shared record (each needs a pass at once: one that no longer exists
// is otherwise first reconciled at the next Sweep).
func (c *ExternalRemediationController) migrate(ctx context.Context) ([]string, error) {
	var added []string
	var err error
	for range 5 {
		var n []string
		n, err = c.migrateOnce(ctx)
		added = append(added, n...)
		if !errors.Is(err, remediation.ErrConflict) {
			break
		}
	}
	if err != nil {
		return added, fmt.Errorf("kube: move the external admissions of %s/%s: %w", c.Namespace, ExternalAdmissionsName, err)
	}
	return added, nil
}

func (c *ExternalRemediationController) migrateOnce(ctx context.Context) ([]string, error) {
	legacy := &Admissions{Client: c.Client, Namespace: c.Namespace, Name: ExternalAdmissionsName}
	old, err := legacy.GetAdmissions(ctx)
	if err != nil || len(old.Machines) == 0 && len(old.Requests) == 0 && len(old.Members) == 0 {
		return nil, err
	}
	shared := &Admissions{Client: c.Client, Namespace: c.Namespace, Section: SectionExternal}
	a, raw, err := shared.getAdmissions(ctx, migratedKey)
	if err != nil {
		return nil, err
	}
	moved := map[string]string{}
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &moved); err != nil {
			return nil, fmt.Errorf("kube: admissions %s/%s: %s: %w", c.Namespace, shared.name(), migratedKey, err)
		}
	}
	var added []string
	for _, m := range old.Machines {
		if v, ok := moved[m]; ok && v == old.Requests[m].Value {
			continue // moved once: never admitted again from here
		}
		moved[m] = old.Requests[m].Value
		added = append(added, m)
		if !a.Has(m) {
			a.Machines = append(a.Machines, m)
		}
		if r, ok := old.Requests[m]; ok && a.Requests[m].Value == "" {
			a.Requests = maps.Clone(a.Requests)
			if a.Requests == nil {
				a.Requests = map[string]remediation.Request{}
			}
			a.Requests[m] = r
		}
		if e, ok := old.Members[m]; ok && !hasMember(a, m) {
			a.Members = maps.Clone(a.Members)
			if a.Members == nil {
				a.Members = map[string]remediation.Member{}
			}
			a.Members[m] = e
		}
	}
	if len(added) > 0 {
		b, err := json.Marshal(moved)
		if err != nil {
			return nil, err
		}
		if err := shared.putAdmissions(ctx, a, map[string]string{migratedKey: string(b)}); err != nil {
			return nil, err
		}
	}
	old.Machines, old.Requests, old.Members = []string{}, nil, nil
	if err := legacy.PutAdmissions(ctx, old); err != nil {
		return added, err
	}
	// Best effort: a marker left names only entries no longer in the old
	// ConfigMap.
	if a, err = shared.GetAdmissions(ctx); err == nil {
		_ = shared.putAdmissions(ctx, a, map[string]string{migratedKey: ""})
	}
	return added, nil
}

func hasMember(a remediation.Admissions, m string) bool {
	_, ok := a.Members[m]
	return ok
}
