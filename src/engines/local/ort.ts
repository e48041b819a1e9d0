/**
 * Lazy access to onnxruntime-node, so that importing the package does not load the ORT binary
 * until a model is opened.
 */
import type * as OrtModule from 'onnxruntime-node';

export type Ort = typeof OrtModule;
export type OrtTensor = OrtModule.Tensor;
export type OrtSession = OrtModule.InferenceSession;
export type SessionOptions = OrtModule.InferenceSession.SessionOptions;
export type ExecutionProvider = OrtModule.InferenceSession.ExecutionProviderConfig;

let ort: Ort | undefined;

export function getOrt(): Ort {
  if (ort === undefined) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    ort = require('onnxruntime-node') as Ort;
  }
  return ort;
}
