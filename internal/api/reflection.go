package api

import (
	_ "embed"
	"fmt"

	"google.golang.org/grpc/reflection"
	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// descriptorSet is `buf build` of proto/ (written by `make generate`). Unlike
// the descriptors compiled into gen/, it keeps the source comments, so
// `grpcurl describe` shows the API reference.
//
//go:embed contextd.binpb
var descriptorSet []byte

// RegisterReflection registers gRPC server reflection (v1) that serves our
// files with their comments and every other file from the global registry.
func RegisterReflection(s reflection.GRPCServer) error {
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(descriptorSet, &fds); err != nil {
		return fmt.Errorf("descriptor set: %w", err)
	}
	files, err := protodesc.NewFiles(&fds)
	if err != nil {
		return fmt.Errorf("descriptor set: %w", err)
	}
	v1reflectiongrpc.RegisterServerReflectionServer(s, reflection.NewServerV1(reflection.ServerOptions{
		Services:           s,
		DescriptorResolver: layeredFiles{files, protoregistry.GlobalFiles},
		ExtensionResolver:  protoregistry.GlobalTypes,
	}))
	return nil
}

// layeredFiles resolves from the first registry that has the name.
type layeredFiles []*protoregistry.Files

func (l layeredFiles) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	for _, f := range l {
		if d, err := f.FindFileByPath(path); err == nil {
			return d, nil
		}
	}
	return nil, protoregistry.NotFound
}

func (l layeredFiles) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	for _, f := range l {
		if d, err := f.FindDescriptorByName(name); err == nil {
			return d, nil
		}
	}
	return nil, protoregistry.NotFound
}
