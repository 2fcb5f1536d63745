package plan

// CheckPut is the check every store makes on a whole-plan write (Put) of
// p over stored, the plan as stored under p's UUID, once the versions
// compared equal: it refuses a write that changes the plan's servers, one
// that sets DryRun on an unfinished plan that is not a dry run
// (DryRunSetRefused, wrapping ErrDryRunSet), and one that makes the plan
// hold servers another unfinished plan holds (NewlyHolds: an ended plan
// set unfinished again, CheckResumed; DryRun cleared on an unfinished
// plan, DryRunClearRefused; both wrap ErrServerInPlan). others is called
// only for the last check, and returns the plans stored (p's own among
// them or not); the store calls CheckPut where that list cannot change
// before the write (under its lock, in its transaction). FileStore,
// BoltStore and fake.PlanStore call it in Put.
func CheckPut(stored, p Plan, others func() ([]Plan, error)) error {
	if err := sameServers(stored, p); err != nil {
		return err
	}
	if err := checkDryRunSet(stored, p); err != nil {
		return err
	}
	if !NewlyHolds(stored.Unfinished(), stored.DryRun, p.Unfinished(), p.DryRun) {
		return nil
	}
	all, err := others()
	if err != nil {
		return err
	}
	return checkHolds(p, !stored.Unfinished(), all)
}
