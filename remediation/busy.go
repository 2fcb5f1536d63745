package remediation

// busy reports whether a remediation is under way for a Machine after a
// phased pass that decided d on o (Result.Busy, reboot.Next.Busy): one in
// flight, asked for (NeedsRemediation), holding an admission, cleaning up
// after itself (a request to remove from a host it moved from, a stray
// request, Node metadata to restore), or acting in this pass. It errs on
// the side of busy: only a Machine at rest (no remediation, or one that
// is over with nothing left of it) is not.
func busy(o Observed, d Decision) bool {
	st := stateAfter(o.State, d)
	return InFlight(st.Phase) || o.Machine.NeedsRemediation || o.Admitted && !d.Release ||
		st.PrevHost != "" || len(st.EarlierHosts) > 0 || !st.StraySeen.IsZero() || st.Backup != nil ||
		d.Admit || d.UpdateState || d.AddRebootAnnotation || d.RemoveRebootAnnotation || d.DeleteNode || d.TaintNode ||
		d.RestoreNode != "" || d.RemoveTaint || d.RemoveNeedsRemediation || d.DeleteMachine ||
		d.RemovePrevRequest || len(d.RemoveEarlierRequests) > 0
}

// tableBusy is busy for the seed's table (Reconciler.Table): an action
// taken, a remediation asked for, or the host holding the reboot
// annotation (the table removes it once the Machine no longer needs
// remediation).
func tableBusy(a TableAction, in TableInput) bool {
	return a != TableNothing || in.NeedsRemediation || in.RebootAnnotation
}
