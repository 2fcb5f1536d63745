package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// addProbes adds the liveness check (the process answers) and the
// readiness check (the manager's informers have synced: a replica that
// cannot reach the API server is not ready).
func addProbes(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	return mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("informers not synced")
		}
		return nil
	})
}

// capiKinds are the Cluster API resources the remediation needs.
var capiKinds = []schema.GroupVersionKind{
	clusterv1.GroupVersion.WithKind("Machine"),
	clusterv1.GroupVersion.WithKind("MachineHealthCheck"),
}

// missingCAPI names the first Cluster API resource the API server does not
// serve ("" if all are), asking discovery directly (not the manager's
// cached mapper, which would remember an old answer).
func missingCAPI(mgr ctrl.Manager) string {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return "discovery: " + err.Error()
	}
	list, err := dc.ServerResourcesForGroupVersion(clusterv1.GroupVersion.String())
	if err != nil {
		return clusterv1.GroupVersion.String()
	}
	for _, gvk := range capiKinds {
		found := false
		for _, r := range list.APIResources {
			found = found || r.Kind == gvk.Kind
		}
		if !found {
			return gvk.String()
		}
	}
	return ""
}

// waitCAPI polls discovery every 30 s and calls restart once the Cluster
// API resources are served.
func waitCAPI(ctx context.Context, mgr ctrl.Manager, restart context.CancelFunc) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if missingCAPI(mgr) == "" {
				fmt.Println("rebootkit-controller: the Cluster API CRDs are served: restarting to start the remediation controller")
				restart()
				return
			}
		}
	}
}
