package imagecache_test

import (
	batchv1 "k8s.io/api/batch/v1"

	"github.com/kubefledged/kube-fledged/internal/commands"
)

type commandsOptions = commands.ControllerOptions

func jobsObj() *batchv1.Job { return &batchv1.Job{} }
