import { backend, gatherLogProbsOnDevice, nativeLoadErrors, setBackend, uploadToDevice } from '../../src';
import { nativeInfo } from '../../src/kernels/backend';
import { EXPECTED_BACKEND } from '../helpers';

describe('backend selection', () => {
  it('runs on the backend this project asked for', () => {
    expect(backend()).toBe(EXPECTED_BACKEND);
  });
  it('has the native addon available in this build', () => {
    expect(nativeLoadErrors()).toEqual([]);
  });
  it('switches backends and rejects unknown names', () => {
    const before = backend();
    setBackend('js');
    expect(backend()).toBe('js');
    setBackend('native');
    expect(backend()).toBe('native');
    setBackend(before);
    expect(() => setBackend('gpu' as never)).toThrow(`Expected 'native' or 'js' for backend but received "gpu"`);
  });
});

describe('logits kept on the GPU (uploadToDevice, gatherLogProbsOnDevice)', () => {
  // On a GPU the CUDA parity suite (test/kernels/cuda-parity.test.ts) runs them for real.
  const cudaUsable = nativeInfo()?.cuda === true;
  const withoutCuda = cudaUsable ? it.skip : it;

  withoutCuda('refuse, saying why, when the loaded addon has no CUDA', () => {
    const why = nativeInfo()?.cudaBuilt
      ? /^Cannot use the 'native-cuda' backend: no usable CUDA device: /
      : /^Cannot use the 'native-cuda' backend: the loaded mempo.node was built without CUDA\. Build the CUDA addon with scripts\/build-cuda.sh/;
    expect(() => uploadToDevice(new Float32Array(4))).toThrow(why);
    const fakeBuffer = { length: 4, byteLength: 16, freed: false } as never;
    expect(() => gatherLogProbsOnDevice(fakeBuffer, new Int32Array(1), 1, 4)).toThrow(why);
  });

  it('checks the data it uploads', () => {
    expect(() => uploadToDevice([1, 2] as never)).toThrow(TypeError);
    expect(() => uploadToDevice(new Float64Array(2) as never)).toThrow(/^Expected Float32Array for data but received /);
  });
});

describe('addon load failure', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
    jest.resetModules();
  });

  it('falls back to JS when the addon cannot load and native was not demanded', () => {
    jest.isolateModules(() => {
      jest.doMock('node-gyp-build', () => () => {
        throw new Error('No native build was found for platform=linux');
      });
      process.env.MEMPO_BACKEND = '';
      delete process.env.MEMPO_NATIVE_BINDING;
      const m = require('../../src') as typeof import('../../src');
      expect(m.backend()).toBe('js');
      expect(m.nativeLoadErrors()[0]).toMatch(/No native build was found/);
      expect(() => m.setBackend('native')).toThrow(/Could not load the mempo native addon[\s\S]*Possible solutions:[\s\S]*MEMPO_BACKEND=js/);
    });
  });

  it('reports the load error when MEMPO_BACKEND=native and the addon is missing', () => {
    jest.isolateModules(() => {
      jest.doMock('node-gyp-build', () => () => {
        throw new Error('No native build was found');
      });
      process.env.MEMPO_BACKEND = 'native';
      process.env.MEMPO_NATIVE_BINDING = '/nonexistent/mempo.node';
      const m = require('../../src') as typeof import('../../src');
      expect(() => m.backend()).toThrow(/MEMPO_NATIVE_BINDING=\/nonexistent\/mempo.node: Cannot find module/);
    });
  });

  // f77a45f fell back to the prebuild: backend() said 'native' and nativeLoadErrors() was [].
  it('an explicit MEMPO_NATIVE_BINDING that does not load is an error naming it, never the prebuild', () => {
    jest.isolateModules(() => {
      let prebuildTried = false;
      jest.doMock('node-gyp-build', () => () => {
        prebuildTried = true;
        return {};
      });
      process.env.MEMPO_BACKEND = '';
      process.env.MEMPO_NATIVE_BINDING = '/nonexistent/mempo.node';
      const m = require('../../src') as typeof import('../../src');
      expect(() => m.backend()).toThrow(/Could not load the mempo native addon[\s\S]*MEMPO_NATIVE_BINDING=\/nonexistent\/mempo.node: Cannot find module/);
      expect(m.nativeLoadErrors()).toEqual([expect.stringMatching(/^MEMPO_NATIVE_BINDING=\/nonexistent\/mempo.node: Cannot find module/)]);
      expect(prebuildTried).toBe(false);
      m.setBackend('js'); // the JS twin stays an explicit choice
      expect(m.backend()).toBe('js');
    });
  });

  it('without the addon, uploadToDevice names the load failure', () => {
    jest.isolateModules(() => {
      jest.doMock('node-gyp-build', () => () => {
        throw new Error('No native build was found');
      });
      process.env.MEMPO_BACKEND = '';
      delete process.env.MEMPO_NATIVE_BINDING;
      const m = require('../../src') as typeof import('../../src');
      expect(() => m.uploadToDevice(new Float32Array(2))).toThrow(
        /^Cannot use the 'native-cuda' backend: Could not load the mempo native addon[\s\S]*No native build was found/,
      );
    });
  });

  it('rejects an unknown MEMPO_BACKEND value', () => {
    jest.isolateModules(() => {
      process.env.MEMPO_BACKEND = 'cuda';
      const m = require('../../src') as typeof import('../../src');
      expect(() => m.backend()).toThrow(`Expected 'native' or 'js' for MEMPO_BACKEND but received "cuda"`);
    });
  });
});
