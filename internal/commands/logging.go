package commands

import (
	"go.uber.org/zap/zapcore"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func zapErrorLevel() zapcore.Level { return zapcore.ErrorLevel }

func clientcmdClusterOverride(master string) clientcmdapi.Cluster {
	return clientcmdapi.Cluster{Server: master}
}
