// Kernel suites (and the runtime scorer, whose log-prob gathering goes through a kernel) run once
// per kernel backend: MEMPO_BACKEND=native, then MEMPO_BACKEND=js (test/setup/backend-*.js,
// checked once in test/kernels/backend.test.ts). Every other suite does not depend on the kernel
// backend and runs once, on the default (native) one.
const BOTH = ['<rootDir>/test/kernels/**/*.test.ts', '<rootDir>/test/engines/local/scorer.test.ts'];
const base = {
  // Shares the main realm's typed arrays with the sandbox (see the file): ORT's outputs pass its own checks.
  testEnvironment: '<rootDir>/test/runtime-environment.js',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json', diagnostics: false }] },
};

module.exports = {
  testTimeout: 120000,
  projects: [
    { ...base, displayName: 'kernels:native', testMatch: BOTH, setupFiles: ['<rootDir>/test/setup/backend-native.js'] },
    { ...base, displayName: 'kernels:js', testMatch: BOTH, setupFiles: ['<rootDir>/test/setup/backend-js.js'] },
    {
      ...base,
      displayName: 'once',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/kernels/', '<rootDir>/test/engines/local/scorer.test.ts'],
      setupFiles: ['<rootDir>/test/setup/backend-native.js'],
    },
  ],
};
