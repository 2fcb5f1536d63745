// Package nodereuse keeps the same bare-metal hosts for a pool of machines
// through an upgrade, so that their disks (and the data on them) are kept.
//
// When a machine of a KubeadmControlPlane or MachineDeployment whose
// template has nodeReuse enabled releases its host, the host is labelled
// infrastructure.cluster.x-k8s.io/node-reuse=kcp-<name> (or md-<name>).
// When the pool's new machines look for hosts, Select picks the labelled
// hosts first and removes the label in the same claim.
//
// # The caller's duties
//
//  1. At deprovisioning, call Deprovision with the host, its pool and the
//     template's nodeReuse flag; if the decision says SetLabel, write the
//     label before the host is released (HostStore.SetLabel).
//  2. To provision machines, list the hosts and call Select (one machine) or
//     SelectN (several machines of the same pool in one pass), with the
//     names of hosts already claimed in this pass in Request.Claimed and a
//     seed of your choosing (e.g. from the machine's UID).
//  3. On OutcomePick, claim the host with optimistic concurrency: set its
//     consumer reference and, if RemoveLabel, remove the label, in one write.
//     On a conflict, list again and select again (Claim does 1 to 3).
//  4. On OutcomeRequeue, look again after RequeueAfter: hosts reserved for
//     the pool exist but are not Available yet. Do not fall back to another
//     host, or the pool's data is lost.
//  5. On OutcomeNoHost, wait for hosts to appear.
//
// # Rules
//
// A host labelled for another pool is never picked. Labelled hosts win
// whether or not reuse is enabled now (the seed's "reuse disabled mid-way"
// answer). Hosts that are claimed, being deleted, in error, paused or
// marked unhealthy, or that the selector refuses, are never picked; a
// labelled one of those that may still become Available (unclaimed, or
// still deprovisioning) makes the answer requeue. Among equal hosts, the
// requested failure domain is preferred, then a pseudo-random order drawn
// from the seed and the host names, so the answer does not depend on the
// order of the list.
package nodereuse
