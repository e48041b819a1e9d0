// The whole suite runs once per backend: every test file executes under MEMPO_BACKEND=native and
// again under MEMPO_BACKEND=js (test/setup/backend-*.js), and each checks which one loaded.
const base = {
  // Shares the main realm's typed arrays with the sandbox (see the file): ORT's outputs pass its own checks.
  testEnvironment: '<rootDir>/test/runtime-environment.js',
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json', diagnostics: false }] },
};

module.exports = {
  testTimeout: 120000,
  projects: [
    { ...base, displayName: 'native', setupFiles: ['<rootDir>/test/setup/backend-native.js'] },
    { ...base, displayName: 'js', setupFiles: ['<rootDir>/test/setup/backend-js.js'] },
  ],
};
