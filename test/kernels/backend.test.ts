import { backend, nativeLoadErrors, setBackend } from '../../src';
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

  it('rejects an unknown MEMPO_BACKEND value', () => {
    jest.isolateModules(() => {
      process.env.MEMPO_BACKEND = 'cuda';
      const m = require('../../src') as typeof import('../../src');
      expect(() => m.backend()).toThrow(`Expected 'native' or 'js' for MEMPO_BACKEND but received "cuda"`);
    });
  });
});
